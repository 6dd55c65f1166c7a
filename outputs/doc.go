// Package outputs turns what a program produced into what a model may see: a Capture bounds one
// output stream of a hostile child, Preview renders a deterministic head-and-tail preview of it,
// and Lines and Search page the rest by line window or regular expression for read_tool_output.
// A BlobStore keeps what was cut under handles, per tenant: FileStore here, on local disk, and
// pgblob.Store (outputs/pgblob) on PostgreSQL for replicas on several machines; blobtest is
// the contract both pass. BlobLines and BlobSearch read a blob in order through a bounded
// buffer, so no blob is ever held whole in memory.
//
// Bytes are counted as the child wrote them; text handed to a model is always valid UTF-8. Every
// invalid input byte is shown as one U+FFFD (three bytes in the text), so a preview's budget is
// measured in rendered bytes while the counts it reports (sizes, the N of "…[elided N bytes]…")
// are in original bytes. Nothing here cuts a rune in half.
//
// Nothing a child writes can make this package allocate beyond the bounds it was given: a
// Capture costs O(maxBytes+previewBytes) however long the stream, and Search uses Go's RE2
// regexp, which runs in time linear in its input, so a hostile pattern cannot hang a search.
//
// It imports the standard library only; the PostgreSQL
// store is a subpackage so that the engine, which imports this package, links no database
// driver. Lines, Search and Preview are pure functions, safe for concurrent use; every
// BlobStore is safe for concurrent use. A Capture is safe for concurrent use: a
// mutex guards its state, so one goroutine may drain a pipe into it while others ask its Size.
package outputs
