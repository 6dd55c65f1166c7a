//go:build linux

package process_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// adder answers up__add with a+b.
type adder struct{ calls atomic.Int32 }

func (a *adder) CallTool(ctx context.Context, name string, args json.RawMessage) toolcall.Answer {
	a.calls.Add(1)
	if name == "up__never" { // answers when the execution ends
		<-ctx.Done()
		return toolcall.Answer{Kind: "cancelled", Message: "the execution ended"}
	}
	var in struct{ A, B int }
	_ = json.Unmarshal(args, &in)
	return toolcall.Answer{Value: json.RawMessage(fmt.Sprint(in.A + in.B))}
}

func (a *adder) ReadHandle(context.Context, string, int, int, string) toolcall.Answer {
	return toolcall.Answer{Kind: "unavailable", Message: "no handles"}
}

// TestAwaitWithNothingElseToRun: a call awaited while the program's loop has nothing else to
// run waits for its answer on the channel itself, not through the loop's poll and callbacks
// (the bootstrap's _idle; most of what an await cost the program), and the loop still runs
// what it has when there is something: a task beside the calls, calls gathered.
func TestAwaitWithNothingElseToRun(t *testing.T) {
	sb := newSandbox(t, engine.DefaultLimits, process.Options{})
	tools := &adder{}
	res := sb.Run(context.Background(), engine.Execution{Program: `import asyncio
loop = asyncio.get_running_loop()
polls = [0]
select = loop._selector.select
def counted(timeout=None):
    polls[0] += 1
    return select(timeout)
loop._selector.select = counted
for i in range(20):
    assert await up__add(a=i, b=1) == i + 1
alone = polls[0]
ticks = []
async def ticker():
    for _ in range(3):
        await asyncio.sleep(0)
        ticks.append(1)
task = asyncio.create_task(ticker())
sums = await asyncio.gather(*[up__add(a=i, b=1) for i in range(5)])
for i in range(5):
    await up__add(a=i, b=2)
await task
return {"alone": alone, "ticks": len(ticks), "sums": sums, "polled": polls[0] > alone}`,
		Terms: engine.Terms{Isolation: engine.LevelProcess}, Tools: tools,
		ToolNames: []string{"up__add"}, Aliases: []string{"up__add"}})
	if res.Failure != nil {
		t.Fatalf("%s: %s\n%s", res.Failure.Kind, res.Failure.Message, res.Failure.Traceback)
	}
	var v struct {
		Alone  int   `json:"alone"`
		Ticks  int   `json:"ticks"`
		Sums   []int `json:"sums"`
		Polled bool  `json:"polled"`
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	if v.Alone != 0 {
		t.Errorf("20 calls with nothing else to run polled the loop %d times, want 0", v.Alone)
	}
	if v.Ticks != 3 || fmt.Sprint(v.Sums) != "[1 2 3 4 5]" || !v.Polled {
		t.Errorf("with a task beside the calls: %s", res.Value)
	}
	if n := tools.calls.Load(); n != 30 {
		t.Errorf("the host saw %d calls, want 30", n)
	}
}

// TestAwaitInterruptedByTheProgram: an exception the program's own signal handler raises while
// a call waits on the channel reaches the awaiting code, as any exception raised there would;
// it is not taken for the channel's end.
func TestAwaitInterruptedByTheProgram(t *testing.T) {
	sb := newSandbox(t, engine.DefaultLimits, process.Options{})
	res := sb.Run(context.Background(), engine.Execution{Program: `import signal
def alarm(signum, frame):
    raise TimeoutError("the program's own alarm")
signal.signal(signal.SIGALRM, alarm)
signal.setitimer(signal.ITIMER_REAL, 0.2)
try:
    await up__never()
    got = "answered"
except TimeoutError as e:
    got = "caught: %s" % e
return [got, await up__add(a=1, b=2)]`,
		Terms: engine.Terms{Isolation: engine.LevelProcess}, Tools: &adder{},
		ToolNames: []string{"up__add", "up__never"}, Aliases: []string{"up__add", "up__never"}})
	if res.Failure != nil {
		t.Fatalf("%s: %s\n%s", res.Failure.Kind, res.Failure.Message, res.Failure.Traceback)
	}
	if got := string(res.Value); got != `["caught: the program's own alarm",3]` {
		t.Errorf("value %s", got)
	}
}
