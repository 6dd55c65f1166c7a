// Package bootstrap embeds bootstrap.py, the code that runs first inside every sandbox child.
//
// The child is started as `python3 -I -c <Source> CANARY PORT4 PORT6 MAXVALUE MODE`, with the
// channel on fd 3. MODE is "warm" for a child started ahead of its program (it imports asyncio
// and traceback once its hello is sent, while it waits) and "cold" otherwise. In socket mode
// (containers) two more arguments follow, SOCKET and KEEP: the
// bootstrap reads the token line from stdin, connects to the Unix socket SOCKET, sends the
// token line first, moves the socket to fd 3, and drops every environment variable not named
// in the comma-separated KEEP (engine/wire documents the framing). SOCKET "-" is stream
// mode (containers no host socket reaches): the token line goes back first on stdout, fd 3 is
// a socket pair's end relayed to stdin and to stdout records, and the program's fd 1 a pipe
// forwarded as records (docs/design.md §4.1). Then it probes its
// own containment, sends the hello frame on fd 3, waits for run or abort, and runs the program
// as the body of an async function: top-level await and return work, the value is the return
// value or the final expression's, and every failure comes back as a done frame with the full
// traceback. Its Python imports only what the interpreter has already loaded plus small C modules
// (_json, _socket, resource, _thread in stream mode, and _signal, fcntl and select to flush the program's output
// before a kill: see "Output at a kill" in package engine), because every import is paid by
// every execution; a cold child loads asyncio only for a program that awaits.
//
// A binding call the program awaits while its event loop has nothing else to run (no ready
// callback, no timer, no file watched but the channel) waits for its answer with a blocking
// read of the channel rather than through the loop: the loop's two polls and callbacks an
// await costs were most of the program's side of a call (issue 27). With anything else to
// run, or other calls in flight, the call awaits as any future does.
//
// A final value the JSON encoder cannot take as it is is converted where a conversion is
// known (numpy, pandas, pydantic v1 and v2, dataclasses, named tuples, enums, dates and times,
// decimals, UUIDs, paths: _to_json), and the done frame names the type (value_type). A
// module is looked at only when the program imported it (sys.modules): the bootstrap imports
// none of them. The conversion spends against the value's ceiling before it copies.
//
// It imports the standard library only.
package bootstrap

import _ "embed"

// Source is the text of bootstrap.py.
//
//go:embed bootstrap.py
var Source string
