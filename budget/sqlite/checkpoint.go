package sqlite

import (
	"context"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget/internal/lazy"
)

// Checkpoints run off the commit path. SQLite's own (wal_autocheckpoint) runs in the
// connection whose commit took the WAL past 1,000 pages, inside that commit, and a checkpoint
// under synchronous=NORMAL waits for the disk twice (the WAL, then the database file): a few
// to tens of milliseconds on the development machine's disk, paid every ~140 binding calls by
// the call whose tool_call_started happened to cross the mark, while it held the write lock.
// So every connection opens with wal_autocheckpoint off, and the checkpointer, a goroutine of
// the Ledger's, runs a PASSIVE checkpoint checkpointPause after a commit pokes it, so at most
// one every checkpointPause: a PASSIVE checkpoint takes no lock a writer waits for, so writes
// go on meanwhile. It waits before, not after, its checkpoint so that a process that lives
// less than that (a one-shot `run`) leaves the whole WAL to the checkpoint SQLite runs as its
// last connection closes, rather than checkpoint twice, each with its two waits for the disk
// (docs/design.md §19.10).
//
// Durability is unchanged: a commit is in the WAL (the process's writes reach the kernel) when
// it returns, so a crash of this process loses nothing committed, with or without a
// checkpoint; a power loss may lose the last commits, as synchronous=NORMAL always could. A
// checkpoint only moves committed pages into the database file so the WAL can start over; the
// WAL thus holds at most about checkpointPause of writes (and whatever a long reader pins, as
// before). Another process on the same file checkpoints as its own settings say; the last
// connection to close checkpoints what is left, as SQLite always does.

// checkpointPause is the least time between two background checkpoints.
const checkpointPause = 250 * time.Millisecond

// checkpointer runs a checkpoint checkpointPause after commits poke it, until stop.
func (s *Ledger) checkpointer() {
	defer s.ckpt.Done()
	for s.ckpt.Kicked() {
		if !s.ckpt.Sleep(checkpointPause) {
			return
		}
		frames := s.checkpoint()
		select {
		case s.checkpointed <- frames: // nil (no test listening): never ready
		default:
		}
	}
}

// checkpoint copies what the WAL holds into the database file (PASSIVE: what no reader pins)
// and returns how many frames the WAL held, -1 when it failed (the next one tries again; a
// failure is no loss, the WAL keeps the pages).
func (s *Ledger) checkpoint() int {
	ctx, cancel := context.WithTimeout(context.Background(), lazy.FlushTimeout)
	defer cancel()
	var busy, frames, copied int
	if err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		return -1
	}
	return frames
}
