// Package identity parses a profile's run_as ("uid:gid", or a range "FIRST-LAST" leased one
// per execution) and leases identities to the local backends. A Pool is safe for concurrent
// use. It imports the standard library only.
package identity
