package configs

import "time"

// The defaults of docs/design.md §3.2, filled after parsing wherever a profile leaves a field out.
const (
	defaultRunAs = "65534:65534"
	// DefaultContainerImage is what `mcp-sandbox image build` builds from the host's Python.
	DefaultContainerImage = "localhost/mcp-sandbox-python:latest"
	// DefaultContainerPython is the interpreter's path inside that image.
	DefaultContainerPython = "/usr/bin/python3"
)

// DefaultHardLimits returns the hard limits a profile gets for each dimension it leaves out.
func DefaultHardLimits() Limits {
	return Limits{
		CPUSeconds:    Seconds(10),
		WallSeconds:   Seconds(30),
		MemoryBytes:   Bytes(512 * MiB),
		FileSizeBytes: Bytes(10 * MiB),
		ProcessCount:  Count(64),
	}
}

// DefaultBindingBudget returns the binding budget a profile gets for each meter it leaves out.
func DefaultBindingBudget() BindingBudget {
	return BindingBudget{
		MaxCalls:          Count(200),
		MaxTotalBytes:     Bytes(8 * MiB),
		MaxProducedBytes:  Bytes(64 * MiB),
		MaxPreservedBytes: Bytes(64 * MiB),
		MaxArgumentBytes:  Bytes(256 * KiB),
		MaxResultBytes:    Bytes(1 * MiB),
	}
}

// DefaultOutputPolicy returns the output policy a profile gets for each field it leaves out.
func DefaultOutputPolicy() OutputPolicy {
	return OutputPolicy{PreviewBytes: Bytes(4000), MaxBytes: Bytes(8 * MiB), Preserve: PreserveWhenAvailable}
}

// DefaultWarm returns the warm pool sizing a profile gets for each field it leaves out: one
// child ready per tenant and terms, up to four while programs come back to back, for a
// single desktop user; back to one after five idle minutes.
func DefaultWarm() Warm {
	return Warm{Min: Count(1), Max: Count(4), IdleSeconds: Seconds(300), Start: Text(WarmStartAuto)}
}

// DefaultArtifactPolicy returns the artifact policy a profile gets for each field it leaves out.
func DefaultArtifactPolicy() ArtifactPolicy {
	return ArtifactPolicy{Collection: CollectionCollect, MaxFiles: Count(64), MaxBytes: Bytes(16 * MiB)}
}

// DefaultImages returns the images block a profile gets for each field it leaves out.
func DefaultImages() Images {
	return Images{InlineBytes: Bytes(512 * KiB)}
}

func orString(s *string, d string) {
	if *s == "" {
		*s = d
	}
}

func orPtr[T any](p **T, d *T) {
	if *p == nil {
		*p = d
	}
}

// DefaultRetentionHours is how long the ledger keeps journals, pending states and recorded
// cassettes where approvals.retention_hours is left out: three days.
const DefaultRetentionHours = 72

// DefaultCassetteKeptBytes is how much of a result under a handle a cassette keeps where
// cassettes.kept_bytes is left out; MaxCassetteKeptBytes bounds what it may be set to.
const (
	DefaultCassetteKeptBytes = 1 * MiB
	MaxCassetteKeptBytes     = 64 * MiB
)

// Retention returns how long the ledger keeps journals and recorded cassettes.
func (c *Config) Retention() time.Duration {
	h := float64(DefaultRetentionHours)
	if r := c.Approvals.RetentionHours; r != nil {
		h = *r
	}
	return time.Duration(h * float64(time.Hour))
}

// CassetteKeptBytes returns cassettes.kept_bytes with its default filled.
func (c *Config) CassetteKeptBytes() int64 {
	if b := c.Cassettes.KeptBytes; b != nil {
		return int64(*b)
	}
	return int64(DefaultCassetteKeptBytes)
}

// DefaultApprovals returns the approvals block a profile gets for each field it leaves out.
func DefaultApprovals() Approvals {
	return Approvals{TimeoutSeconds: Seconds(120), PlanSeconds: Seconds(600)}
}

// withProfileDefaults returns p with every field it left out filled. It never writes through
// p's pointers, so p's owner is unaffected.
func withProfileDefaults(p Profile) Profile {
	orString(&p.Backend, BackendLocal)
	orString(&p.Isolation, IsolationProcess)
	orString(&p.RunAs, defaultRunAs)

	l, dl := &p.HardLimits, DefaultHardLimits()
	orPtr(&l.CPUSeconds, dl.CPUSeconds)
	orPtr(&l.WallSeconds, dl.WallSeconds)
	orPtr(&l.MemoryBytes, dl.MemoryBytes)
	orPtr(&l.FileSizeBytes, dl.FileSizeBytes)
	orPtr(&l.ProcessCount, dl.ProcessCount)

	b, db := &p.BindingBudget, DefaultBindingBudget()
	orPtr(&b.MaxCalls, db.MaxCalls)
	orPtr(&b.MaxTotalBytes, db.MaxTotalBytes)
	orPtr(&b.MaxProducedBytes, db.MaxProducedBytes)
	orPtr(&b.MaxPreservedBytes, db.MaxPreservedBytes)
	orPtr(&b.MaxArgumentBytes, db.MaxArgumentBytes)
	orPtr(&b.MaxResultBytes, db.MaxResultBytes)

	o, do := &p.Output, DefaultOutputPolicy()
	orPtr(&o.PreviewBytes, do.PreviewBytes)
	orPtr(&o.MaxBytes, do.MaxBytes)
	orString(&o.Preserve, do.Preserve)

	orPtr(&p.Approvals.TimeoutSeconds, DefaultApprovals().TimeoutSeconds)
	orPtr(&p.Approvals.PlanSeconds, DefaultApprovals().PlanSeconds)

	a, da := &p.Artifacts, DefaultArtifactPolicy()
	orString(&a.Collection, da.Collection)
	orPtr(&a.MaxFiles, da.MaxFiles)
	orPtr(&a.MaxBytes, da.MaxBytes)

	orPtr(&p.Images.InlineBytes, DefaultImages().InlineBytes)

	w, dw := &p.Warm, DefaultWarm()
	if w.Max == nil && w.Min != nil && *w.Min > *dw.Max {
		w.Max = w.Min // a min set above the default max raises it
	}
	orPtr(&w.Min, dw.Min)
	orPtr(&w.Max, dw.Max)
	orPtr(&w.IdleSeconds, dw.IdleSeconds)
	orPtr(&w.Start, dw.Start)

	if p.Backend == BackendContainer || p.Backend == BackendLocal && p.Container != nil {
		var c Container
		if p.Container != nil {
			c = *p.Container
		}
		orString(&c.Image, DefaultContainerImage)
		orString(&c.Python, DefaultContainerPython)
		p.Container = &c
	}
	return p
}

// withTenantDefaults returns t with each agent's code_execution defaults filled, on copies.
func withTenantDefaults(t Tenant) Tenant {
	if t.Agents == nil {
		return t
	}
	agents := make(map[string]Agent, len(t.Agents))
	for name, a := range t.Agents {
		if a.CodeExecution != nil {
			ce := *a.CodeExecution
			orString(&ce.Profile, DefaultProfileName)
			orString(&ce.Isolation, IsolationProcess)
			orString(&ce.Network, NetworkNone)
			a.CodeExecution = &ce
		}
		agents[name] = a
	}
	t.Agents = agents
	return t
}

// withDefaults returns a copy of c with defaults filled and Sandbox folded into
// Profiles["default"] (profiles.default wins if both are set; Validate reports that). c is not
// modified.
func (c *Config) withDefaults() *Config {
	out := *c
	out.Profiles = make(map[string]Profile, len(c.Profiles)+1)
	for name, p := range c.Profiles {
		out.Profiles[name] = withProfileDefaults(p)
	}
	if c.Sandbox != nil {
		if _, ok := out.Profiles[DefaultProfileName]; !ok {
			out.Profiles[DefaultProfileName] = withProfileDefaults(*c.Sandbox)
		}
		out.Sandbox = nil
	}
	out.Upstreams = make(map[string]Upstream, len(c.Upstreams))
	for name, u := range c.Upstreams {
		out.Upstreams[name] = u
	}
	out.Tenants = make(map[string]Tenant, len(c.Tenants))
	for name, t := range c.Tenants {
		out.Tenants[name] = withTenantDefaults(t)
	}
	return &out
}

// Text returns a pointer to a copy of s: a string field's default.
func Text(s string) *string { return &s }
