package toolshape

import "testing"

func TestAliasable(t *testing.T) {
	for name, want := range map[string]bool{
		"docs__list_repos": true, "docs__list-repos": false, "docs__2fa": true, "docs__class": true,
		"class": false, "2fa": false, "None": false, "match": true, "": false, "a.b": false, "café": false,
	} {
		if got := Aliasable(name); got != want {
			t.Errorf("Aliasable(%q) = %v, want %v", name, got, want)
		}
	}
}
