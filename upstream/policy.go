package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Policy is what narrows a catalogue for one turn: a tenant's grant and policy, and an agent's
// bindings. cmd converts the config's tenant policy into it.
type Policy struct {
	// Grant names the servers the tenant is granted.
	Grant []string
	// Deny and ApprovalRequired are globs over model-facing names.
	Deny, ApprovalRequired []string
	// IgnoreDestructive (policy.destructive_needs_approval: false) means a server's
	// destructiveHint alone does not make a tool need approval; the globs and rules still do.
	IgnoreDestructive bool
	// Rules match a call's arguments (see Rule).
	Rules []Rule
	// Bindings narrows what a program may call; nil means every callable tool.
	Bindings *[]string
}

// RuleEffect is what an argument rule does to a call whose argument it does not allow.
type RuleEffect string

// The effects of a rule.
const (
	// RuleDeny refuses the call (denied), before anyone is asked.
	RuleDeny RuleEffect = "deny"
	// RuleApproval sends the call to a person for approval.
	RuleApproval RuleEffect = "approval_required"
)

// Rule is one argument rule of a tenant's policy (policy.rules): for a call of a tool matching
// Tool, the value at Argument must be allowed, else Otherwise applies. Allowed means: the value
// is a string, a number or a boolean whose text (a number's as written, "true"/"false") is one
// of Allow, or matches Pattern whole; an array is allowed when it holds at least one element
// and every element is. An absent value, null, an object, an empty array, or an array holding
// an array or an object, is not allowed (an empty array said nothing the rule could check, and
// `repo: []` reached the upstream). Passing a rule never lifts
// another rule, a glob or a destructive hint: rules only add refusals and approvals.
type Rule struct {
	// Tool is a glob over model-facing names, as in Deny.
	Tool string
	// Argument is a path into the arguments object: keys joined by ".", e.g. "repo" or
	// "target.owner".
	Argument string
	// Allow lists the allowed values; Pattern is an RE2 expression the whole value must
	// match. Exactly one is set (configs checks it).
	Allow   []string
	Pattern string
	// Otherwise is RuleDeny or RuleApproval.
	Otherwise RuleEffect
}

// rule is a Rule ready to check calls: its pattern compiled, anchored to the whole value.
type rule struct {
	Rule
	path  []string
	allow map[string]bool
	re    *regexp.Regexp // nil with a Pattern that did not compile: nothing is allowed
}

func compileRules(rs []Rule) []rule {
	out := make([]rule, 0, len(rs))
	for _, r := range rs {
		c := rule{Rule: r, path: strings.Split(r.Argument, "."), allow: map[string]bool{}}
		for _, a := range r.Allow {
			c.allow[a] = true
		}
		if r.Pattern != "" {
			// A pattern configs did not see (a hand-built Policy) that does not compile allows
			// nothing: a rule fails closed.
			c.re, _ = regexp.Compile(`^(?:` + r.Pattern + `)$`)
		}
		out = append(out, c)
	}
	return out
}

// allows reports whether v, the decoded argument (json.Number for numbers), is allowed.
func (r *rule) allows(v any, present bool) bool {
	if !present {
		return false
	}
	if vs, ok := v.([]any); ok {
		if len(vs) == 0 {
			return false
		}
		for _, e := range vs {
			if _, nested := e.([]any); nested || !r.allows(e, true) {
				return false
			}
		}
		return true
	}
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case json.Number:
		text = x.String()
	case bool:
		text = fmt.Sprint(x)
	default: // null, an object
		return false
	}
	if r.Pattern != "" {
		return r.re != nil && r.re.MatchString(text)
	}
	return r.allow[text]
}

// lookup follows path through nested objects.
func lookup(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// NeedsApproval reports whether a call of tool may need a person's approval: the tool matches
// an approval_required glob, its server annotates it destructive (unless the policy ignores
// that), or an argument rule that asks for approval applies to it. Exposed tools that may need
// approval are annotated destructive to the host, and get_tool_info says so.
func (t *Turn) NeedsApproval(tool *Tool) bool {
	if tool.Destructive && !t.ignoreDestructive || matchAny(t.approval, tool.Name) {
		return true
	}
	for i := range t.rules {
		if t.rules[i].Otherwise == RuleApproval && glob(t.rules[i].Tool, tool.Name) {
			return true
		}
	}
	return false
}

// Approval is the policy's word on one call of tool with args (as Tool.Arguments returned
// them) beyond its name: a refusal (denied) by an argument rule, or else the reasons the call
// needs a person's approval, each a phrase safe to show a model and a person; none when it
// needs none.
func (t *Turn) Approval(tool *Tool, args json.RawMessage) (reasons []string, _ *failure.Error) {
	if tool.Destructive && !t.ignoreDestructive {
		reasons = append(reasons, "its server marks it destructive (destructiveHint)")
	}
	for _, p := range t.approval {
		if glob(p, tool.Name) {
			reasons = append(reasons, fmt.Sprintf("the tenant's policy requires approval for it (approval_required: %q)", p))
			break
		}
	}
	var obj map[string]any
	for i := range t.rules {
		r := &t.rules[i]
		if !glob(r.Tool, tool.Name) {
			continue
		}
		if obj == nil {
			obj = map[string]any{}
			dec := json.NewDecoder(bytes.NewReader(args))
			dec.UseNumber()
			_ = dec.Decode(&obj) // Arguments has checked it is one object
		}
		v, ok := lookup(obj, r.path)
		if r.allows(v, ok) {
			continue
		}
		if r.Otherwise == RuleDeny {
			return nil, refusal(failure.Denied, "%s is denied by this tenant's policy for this value of argument %q", tool.Name, r.Argument)
		}
		reasons = append(reasons, fmt.Sprintf("argument %q is not among the values the tenant's policy allows without approval", r.Argument))
	}
	return reasons, nil
}
