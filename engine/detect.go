package engine

import (
	"fmt"
	"slices"
	"strings"
)

// LocalBackend is one local isolation mechanism as detected on this host. engine cannot
// import the backends, so cmd/ detects each one and hands the list here for ordering and
// selection.
type LocalBackend struct {
	Name      string `json:"name"`
	Isolation Level  `json:"isolation"` // the level it reaches when available
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"` // why it is unavailable, with install guidance
}

// localPreference breaks ties between backends of the same level: native first.
var localPreference = []string{"namespaces", "bwrap", "process"}

// DetectLocalBackends orders detected backends strongest first: available before
// unavailable, a higher isolation level first, then native namespaces, bwrap, process.
func DetectLocalBackends(found []LocalBackend) []LocalBackend {
	out := slices.Clone(found)
	rank := func(n string) int {
		if i := slices.Index(localPreference, n); i >= 0 {
			return i
		}
		return len(localPreference)
	}
	slices.SortStableFunc(out, func(a, b LocalBackend) int {
		switch {
		case a.Available != b.Available:
			if a.Available {
				return -1
			}
			return 1
		case a.Isolation != b.Isolation:
			if a.Isolation.AtLeast(b.Isolation) {
				return -1
			}
			return 1
		}
		return rank(a.Name) - rank(b.Name)
	})
	return out
}

// SelectLocal picks what `backend: local` means here: the strongest available backend that
// reaches level. It never returns a weaker one; the error lists why each candidate was not
// usable, with the guidance its detection gave.
func SelectLocal(found []LocalBackend, level Level) (LocalBackend, error) {
	var why []string
	for _, b := range DetectLocalBackends(found) {
		switch {
		case b.Available && b.Isolation.AtLeast(level):
			return b, nil
		case !b.Available:
			why = append(why, fmt.Sprintf("%s: %s", b.Name, b.Reason))
		default:
			why = append(why, fmt.Sprintf("%s: reaches only %s", b.Name, b.Isolation))
		}
	}
	return LocalBackend{}, fmt.Errorf("no local backend reaches isolation %q on this host (%s)", level, strings.Join(why, "; "))
}
