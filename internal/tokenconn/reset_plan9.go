package tokenconn

import "errors"

// errReset: Plan 9 has no errno for a reset, so only an end of file ends a channel there.
var errReset = errors.New("tokenconn: no reset errno on plan9")
