package cassette

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
)

// Keeper is serve's execution.CassetteKeeper (cassettes.record): each execution's cassette,
// written exactly as `run --record` writes one, kept in the ledger for `mcp-sandbox export`.
type Keeper struct {
	store     budget.Cassettes
	secrets   func() []string
	keptBytes int64
	log       *slog.Logger
}

// NewKeeper keeps cassettes in store; secrets are the values to hide, asked for at each
// execution's start (so a credential resolves as it does then); keptBytes is how much of a
// result kept under a handle a cassette holds (cassettes.kept_bytes).
func NewKeeper(store budget.Cassettes, secrets func() []string, keptBytes int64, log *slog.Logger) *Keeper {
	return &Keeper{store: store, secrets: secrets, keptBytes: keptBytes, log: log}
}

// Tape is a Recorder hiding the secrets as they resolve now, at the execution's start.
func (k *Keeper) Tape() binding.Tape { return NewRecorder(k.secrets(), k.keptBytes) }

// Keep writes tape's cassette of the execution id and keeps it; what goes wrong is logged.
func (k *Keeper) Keep(ctx context.Context, tape binding.Tape, id string, p execution.Program, res *execution.Result) {
	rec, ok := tape.(*Recorder)
	if !ok {
		return
	}
	var buf bytes.Buffer
	err := rec.Write(&buf, p.Code, p.AgentVersion, res.Terms, res)
	if err == nil {
		err = k.store.PutCassette(ctx, budget.Cassette{ExecutionID: id, Run: p.Run, Data: buf.Bytes()})
	}
	if err != nil {
		k.log.Error("the execution's cassette was not kept", "execution", id, "run", p.Run.ID, "err", err)
	}
}
