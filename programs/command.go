package programs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// Command is one `mcp-sandbox programs` invocation (cmd parses its flags): Verb save, list,
// show or delete, of Tenant's program Name; save takes Code (the file's text), Description,
// Agent (one agent only, or "") and By (who saves). JSON prints the program (or the list) as
// JSON instead of text. Prefixes, for what save says, is the prefix each of Tenant's agents
// that run code is offered saved programs under, in the config at hand ("" for DefaultPrefix).
type Command struct {
	Verb, Tenant, Name           string
	Code, Description, Agent, By string
	JSON                         bool
	Prefixes                     map[string]string
}

// Run runs c against store, printing what it did on out.
func (c Command) Run(ctx context.Context, store budget.Programs, out io.Writer) error {
	switch c.Verb {
	case "save":
		p, err := Save(ctx, store, c.Tenant, c.Agent, c.Name, c.Code, c.Description, c.By)
		if err != nil {
			return err
		}
		if c.JSON {
			return json.NewEncoder(out).Encode(p)
		}
		fmt.Fprintf(out, "saved %s for tenant %s, version %s; %s\n", p.Name, p.Tenant, p.Version, offeredAs(p, c.Prefixes))
		fmt.Fprintf(out, "  input schema: %s\n", p.InputSchema)
		return nil
	case "list":
		list, err := store.SavedPrograms(ctx, c.Tenant)
		if err != nil {
			return err
		}
		if c.JSON {
			return json.NewEncoder(out).Encode(list)
		}
		if len(list) == 0 {
			fmt.Fprintf(out, "tenant %s has no saved program\n", c.Tenant)
		}
		for _, p := range list {
			agent := "every agent"
			if p.Agent != "" {
				agent = "agent " + p.Agent
			}
			fmt.Fprintf(out, "%s  %s  for %s  saved %s by %s  %s\n", p.Name, p.Version, agent, p.SavedAt.UTC().Format("2006-01-02 15:04:05Z"), p.SavedBy, firstLine(p.Description))
		}
		return nil
	case "show":
		p, err := store.SavedProgram(ctx, c.Tenant, c.Name)
		if err != nil {
			return err
		}
		runs, err := store.ProgramRuns(ctx, c.Tenant, c.Name)
		if err != nil {
			return err
		}
		if c.JSON {
			return json.NewEncoder(out).Encode(struct {
				budget.SavedProgram
				Runs []budget.ProgramRun `json:"runs"`
			}{p, runs})
		}
		fmt.Fprintf(out, "%s (tenant %s), version %s, saved %s by %s\n%s\ninput schema: %s\nruns: %d\n--- code ---\n%s\n", p.Name, p.Tenant, p.Version,
			p.SavedAt.UTC().Format("2006-01-02 15:04:05Z"), p.SavedBy, p.Description, p.InputSchema, len(runs), p.Code)
		return nil
	case "delete":
		if err := store.DeleteProgram(ctx, c.Tenant, c.Name); err != nil {
			return err
		}
		fmt.Fprintf(out, "deleted %s of tenant %s\n", c.Name, c.Tenant)
		return nil
	}
	return fmt.Errorf("unknown verb %q: want save, list, show or delete", c.Verb)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// offeredAs says under which tool name p is offered to which of the agents in prefixes (agent
// → prefix): only to its own agent when it has one.
func offeredAs(p budget.SavedProgram, prefixes map[string]string) string {
	agents := map[string][]string{} // tool name → agents
	for agent, prefix := range prefixes {
		if !OfferedTo(p, agent) {
			continue
		}
		name := ToolName(Prefix(prefix), p.Name)
		agents[name] = append(agents[name], agent)
	}
	if len(agents) == 0 {
		if p.Agent != "" {
			return fmt.Sprintf("offered to no agent yet: agent %s of tenant %s does not run code in this config", p.Agent, p.Tenant)
		}
		return fmt.Sprintf("offered to no agent yet: no agent of tenant %s runs code in this config", p.Tenant)
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		slices.Sort(agents[name])
		parts = append(parts, fmt.Sprintf("as %s to agent %s", name, strings.Join(agents[name], ", ")))
	}
	return "offered " + strings.Join(parts, "; ")
}
