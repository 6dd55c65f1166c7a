package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
)

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("export", exportUsage, stdout, stderr)
	output := fs.StringP("output", "o", "", "write the cassette to FILE (an execution), or one per execution into DIR (a Run)")
	tenant := fs.String("tenant", "", "the tenant whose Run it is (default: whichever tenant has a Run of that id)")
	warnByDefault(fs)
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	if fs.NArg() != 1 || *output == "" {
		fs.Usage()
		return exitUsage, usagef("want exactly one EXECUTION or RUN, and -o FILE")
	}
	id := fs.Arg(0)
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	if !assembly.HasLedger(cfg) {
		return exitUsage, usagef("the config has no data_dir and no ledger.postgres: there is no ledger to export from")
	}
	st, err := assembly.OpenStorage(ctx, cfg)
	if err != nil {
		return exitCode(err), err
	}
	defer st.Close()
	store := st.Ledger
	secrets := assembly.ConfigSecrets(cfg)
	c, err := store.Cassette(ctx, id)
	switch {
	case err == nil:
		if err := writePrivate(*output, cassette.Scrub(c.Data, secrets)); err != nil {
			return exitFailure, err
		}
		fmt.Fprintf(stdout, "%s: the cassette of execution %s (run %s of tenant %s)\n", *output, c.ExecutionID, c.Run.ID, c.Run.Tenant)
		return exitOK, nil
	case !errors.Is(err, budget.ErrNotFound):
		return exitFailure, err
	}
	found, err := runCassettes(ctx, store, cfg, *tenant, id)
	if err != nil {
		return exitFailure, err
	}
	if len(found) == 0 {
		return exitFailure, fmt.Errorf("no recorded execution or Run %q in the ledger: recording needs cassettes.record in the server's config, "+
			"and a cassette is kept approvals.retention_hours (%v)", id, cfg.Retention())
	}
	if err := refuseLink(*output, true); err != nil {
		return exitFailure, err
	}
	if err := os.MkdirAll(*output, 0o700); err != nil {
		return exitFailure, err
	}
	for _, c := range found {
		f := filepath.Join(*output, c.ExecutionID+".jsonl")
		if err := writePrivate(f, cassette.Scrub(c.Data, secrets)); err != nil {
			return exitFailure, err
		}
		fmt.Fprintf(stdout, "%s: the cassette of execution %s (run %s of tenant %s)\n", f, c.ExecutionID, c.Run.ID, c.Run.Tenant)
	}
	return exitOK, nil
}

// runCassettes are the cassettes of the Run id (as the ledger names it, or as a host or
// `run --run` named it) of tenant, or of the one tenant that has such a Run.
func runCassettes(ctx context.Context, store budget.Cassettes, cfg *assembly.Config, tenant, id string) ([]budget.Cassette, error) {
	tenants := []string{tenant}
	if tenant == "" {
		tenants = slices.Sorted(maps.Keys(cfg.Tenants))
	}
	var found []budget.Cassette
	var whose []string
	for _, t := range tenants {
		refs := []budget.RunRef{{Tenant: t, ID: id}}
		if named, ok := execution.NamedRun(t, id); ok {
			refs = append(refs, named)
		}
		for _, r := range refs {
			cs, err := store.RunCassettes(ctx, r)
			if err != nil {
				return nil, err
			}
			if len(cs) > 0 {
				found = append(found, cs...)
				whose = append(whose, t+" "+r.ID)
			}
		}
	}
	if len(whose) > 1 {
		slices.Sort(whose)
		return nil, usagef("Run %q is more than one Run (%v): name its tenant with --tenant", id, whose)
	}
	return found, nil
}

// writePrivate writes b to path, readable by its owner only (a cassette holds a program's calls
// and results), whatever was there: through a new file, 0600 from its creation, in path's
// directory, renamed over path, so an existing file's mode (a world-readable one in a
// group-writable directory) is never kept. A path that is a symbolic link is refused rather
// than followed or replaced: the link may lead where the caller did not mean to write, and
// replacing it would surprise whoever made it; so is anything but a regular file.
func writePrivate(path string, b []byte) error {
	if err := refuseLink(path, false); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o600) // CreateTemp's mode already; said, not assumed
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// refuseLink says why path may not be written (or, dir, written into): it is a symbolic link,
// or not a regular file (a directory, with dir). A path that does not exist yet is fine.
func refuseLink(path string, dir bool) error {
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case info.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: give the path of the file itself (a link is neither followed nor replaced)", path)
	case dir && !info.IsDir():
		return fmt.Errorf("%s is not a directory", path)
	case !dir && !info.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}

const exportUsage = `Usage: mcp-sandbox export [--config FILE] [--tenant T] EXECUTION|RUN -o FILE|DIR

Writes the cassette of an execution a server recorded in the ledger (cassettes.record in its
config), as "mcp-sandbox run --record FILE" writes one: the program, one line per binding call
(arguments redacted, results or the kept bytes of their handles) and the result, with every
secret of the config replaced by "[redacted]". Any process on the same ledger exports it: with
ledger.postgres, an execution another replica ran. EXECUTION is an execution's id (x_…, named
in the server's log lines); a RUN (its id, or the name a host gave it in _meta
"mcp-sandbox/run") writes one EXECUTION.jsonl per recorded execution into the directory DIR,
ready for "mcp-sandbox replay DIR". Cassettes are kept approvals.retention_hours (72 hours).
Each file is written readable by its owner only (0600), through a new file renamed into place;
a FILE or DIR that is a symbolic link is refused.

Exit status: 0 when written, 1 when nothing was recorded under that id, 2 for usage or
configuration errors.
`
