package toolshape

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MainInput reads the input schema of a saved program (docs/design.md §23) from its one
// top-level `async def main(...)`: each parameter a property of the type its annotation names
// (str, int, float, bool, list, dict and their generic forms, Optional[X], X | None, Any),
// required unless it has a default or allows None, no other key admitted. A program with no
// such main, two of them, a parameter without an annotation, *args, **kwargs or an annotation
// outside that list is refused, with the reason.
func MainInput(code string) (json.RawMessage, error) {
	starts := mainDef.FindAllStringIndex(code, -1)
	switch len(starts) {
	case 0:
		return nil, errors.New("the program has no top-level `async def main(...)`: a saved program's parameters are main's")
	case 1:
	default:
		return nil, errors.New("the program defines `async def main` more than once")
	}
	params, err := mainParams(code[starts[0][1]:])
	if err != nil {
		return nil, err
	}
	var props []string // `"name":schema`, in main's order, which the stub keeps
	required := []string{}
	for _, p := range params {
		name, rest, _ := strings.Cut(p, ":")
		name = strings.TrimSpace(name)
		if strings.HasPrefix(name, "*") || name == "/" {
			if name == "*" || name == "/" {
				continue
			}
			return nil, fmt.Errorf("main's parameter %s: a saved program takes named parameters only, not *args or **kwargs", name)
		}
		if !identifier.MatchString(name) {
			return nil, fmt.Errorf("main's parameter %q is not a Python name", name)
		}
		annotation, _, hasDefault := strings.Cut(rest, "=")
		if !strings.Contains(p, ":") || strings.TrimSpace(annotation) == "" {
			return nil, fmt.Errorf("main's parameter %s has no annotation; write its type (str, int, float, bool, list, dict)", name)
		}
		schema, optional, err := annotationSchema(strings.TrimSpace(annotation))
		if err != nil {
			return nil, fmt.Errorf("main's parameter %s: %v", name, err)
		}
		b, _ := json.Marshal(schema)
		props = append(props, strconv.Quote(name)+":"+string(b))
		if !hasDefault && !optional {
			required = append(required, name)
		}
	}
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":` + string(req) + `,"additionalProperties":false}`), nil
}

var (
	mainDef    = regexp.MustCompile(`(?m)^async def main\(`)
	identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// mainParams splits the text after `async def main(` into its parameters, up to the
// parenthesis that closes it: commas at depth 0 outside strings part them.
func mainParams(s string) ([]string, error) {
	var params []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ')' && depth > 0:
			depth--
		case c == ')':
			if last := strings.TrimSpace(s[start:i]); last != "" {
				params = append(params, last)
			}
			return params, nil
		case c == ',' && depth == 0:
			params = append(params, strings.TrimSpace(s[start:i]))
			start = i + 1
		case c == '#':
			if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
				s = s[:i] + strings.Repeat(" ", j) + s[i+j:]
			}
		}
	}
	return nil, errors.New("main's parameter list is not closed")
}

// annotationSchema is the JSON Schema of a parameter annotated a; optional says it allows
// None.
func annotationSchema(a string) (schema map[string]any, optional bool, _ error) {
	if inner, ok := strings.CutPrefix(a, "Optional["); ok && strings.HasSuffix(inner, "]") {
		s, _, err := annotationSchema(strings.TrimSpace(strings.TrimSuffix(inner, "]")))
		return s, true, err
	}
	if parts := strings.Split(a, "|"); len(parts) == 2 {
		x, y := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1])
		if y == "None" {
			s, _, err := annotationSchema(x)
			return s, true, err
		}
		if x == "None" {
			s, _, err := annotationSchema(y)
			return s, true, err
		}
	}
	base, _, _ := strings.Cut(a, "[")
	switch strings.TrimSpace(base) {
	case "str":
		return map[string]any{"type": "string"}, false, nil
	case "int":
		return map[string]any{"type": "integer"}, false, nil
	case "float":
		return map[string]any{"type": "number"}, false, nil
	case "bool":
		return map[string]any{"type": "boolean"}, false, nil
	case "list", "List":
		return map[string]any{"type": "array"}, false, nil
	case "dict", "Dict":
		return map[string]any{"type": "object"}, false, nil
	case "Any", "typing.Any":
		return map[string]any{}, false, nil
	}
	return nil, false, fmt.Errorf("annotation %s is not one a saved program's parameters take (str, int, float, bool, list, dict, Optional[...], Any)", a)
}
