package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/programs"
)

// runPrograms is `mcp-sandbox programs`: its flags; what each verb does is package programs'
// (programs.Command), over the run ledger the servers share.
func runPrograms(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("programs", programsUsage, stdout, stderr)
	c := programs.Command{}
	fs.BoolVar(&c.JSON, "json", false, "print as JSON")
	fs.StringVar(&c.Tenant, "tenant", "", "the tenant whose programs these are (required)")
	fs.StringVar(&c.Description, "description", "", "save: what the program does, as its tool's description")
	fs.StringVar(&c.Agent, "agent", "", "save: offer it to this agent only (default: every agent of the tenant that runs code)")
	fs.StringVar(&c.By, "by", "", `save: who saves it (default: "operator" and $USER)`)
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	rest := fs.Args()
	if len(rest) > 0 {
		c.Verb, rest = rest[0], rest[1:]
	}
	switch {
	case c.Tenant == "":
		fs.Usage()
		return exitUsage, usagef("--tenant is required: saved programs are a tenant's")
	case c.Verb == "save" && len(rest) == 2:
		code, err := os.ReadFile(rest[1])
		if err != nil {
			return exitUsage, usagef("%v", err)
		}
		c.Name, c.Code = rest[0], string(code)
	case (c.Verb == "show" || c.Verb == "delete") && len(rest) == 1:
		c.Name = rest[0]
	case c.Verb == "list" && len(rest) == 0:
	default:
		fs.Usage()
		return exitUsage, usagef("want save NAME FILE, list, show NAME or delete NAME")
	}
	if c.By == "" {
		c.By = strings.TrimSpace("operator " + os.Getenv("USER"))
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	c.Prefixes = assembly.ProgramPrefixes(cfg, c.Tenant)
	led, closeLedger, err := assembly.OpenSharedLedger(ctx, cfg)
	if err != nil {
		return exitCode(err), err
	}
	defer closeLedger()
	if err := c.Run(ctx, led, stdout); err != nil {
		return exitFailure, err
	}
	return exitOK, nil
}

const programsUsage = `Usage: mcp-sandbox programs save NAME FILE --tenant T [--description TEXT] [--agent A] [--config FILE] [--json]
       mcp-sandbox programs list --tenant T [--config FILE] [--json]
       mcp-sandbox programs show NAME --tenant T [--config FILE] [--json]
       mcp-sandbox programs delete NAME --tenant T [--config FILE]

Saved programs: a program that worked, saved under a name, becomes a tool of the tenant's
agents that run code, saved__NAME (PREFIX__NAME where an agent's programs.prefix names one;
save says which), which a host calls with the arguments of the program's one
` + "`async def main(...)`" + `. Each parameter needs an annotation (str, int, float, bool, list,
dict, Optional[...], Any): the tool's input schema is read from them. A call runs the program
then awaits main(**arguments), under the agent's terms, policy, budgets and approvals, and its
value is the result's; the result names the version that ran (the hash of the text). Programs
are kept in the run ledger the servers share (data_dir's SQLite file, or ledger.postgres), so
every replica offers them; the operator's HTTP route /v1/programs/{name}?tenant=T (GET, PUT
{"code", "description", "agent"}, DELETE) does the same as this command.

  save     save FILE as NAME (a lowercase Python name): a new text under a name is a new
           version, which answers from then on
  list     the tenant's programs: name, version, agent, when and by whom saved
  show     one program: its description, input schema, how many times it ran, and its text
  delete   remove NAME: its tool disappears from the hosts' listings

Example:
  mcp-sandbox programs save refund_order refund.py --tenant acme --description "Refunds one order." --config deploy.yaml

Exit status: 0 when done; 1 when the program cannot be saved (the reason), is not there, or the
ledger failed; 2 for usage or configuration errors.
`
