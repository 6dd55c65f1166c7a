package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// DefaultAgentName is the agent /mcp serves when a tenant has more than one.
const DefaultAgentName = "default"

// HTTPOptions configure HTTPHandler.
type HTTPOptions struct {
	// Agents are every agent of every tenant that may be served.
	Agents []Agent
	// Authenticate maps a bearer token to its tenant. It must be safe for concurrent use.
	Authenticate func(token string) (tenant string, ok bool)
	// OAuth, when set, also admits tenants by OAuth access tokens (docs/design.md §10): a
	// token no static token matches goes to OAuth.Verify.
	OAuth *OAuth
	// Tokenless, when set, is asked for every request without an Authorization header and
	// names its tenant, or "" to require a token (the answer can change while serving: a
	// loopback listener for one tenant stays tokenless only while no tenant has a token). A
	// request that does carry a token is always checked. It must be safe for concurrent use.
	Tokenless func() string
	// Loopback turns on Host header protection: the listener is on a loopback address, so a
	// request naming any other host is a DNS-rebinding attempt and gets 403.
	Loopback bool
	// MaxBodyBytes bounds a request body (default 4 MiB).
	MaxBodyBytes int64
	// SessionTimeout closes idle sessions (default 30 minutes).
	SessionTimeout time.Duration
	// Ready answers /readyz; nil means always ready.
	Ready func() bool
	// Operator, when set, says whether a bearer token is an operator's
	// (approvals.operator_tokens): /v1/approvals is then served (operator.go), to operator
	// tokens only, over the ledger of Server.Ledger when it keeps pauses. It must be safe for
	// concurrent use.
	Operator func(token string) bool
	// Server configures each agent's server.
	Server *Options
	Logger *slog.Logger
}

// OAuth makes the HTTP face an OAuth 2.1 resource server.
type OAuth struct {
	// Metadata is the Protected Resource Metadata (RFC 9728), served at
	// /.well-known/oauth-protected-resource and at MetadataPath.
	Metadata *oauthex.ProtectedResourceMetadata
	// MetadataURL is the document's URL that 401 and 403 challenges name as resource_metadata;
	// MetadataPath is its path, served besides the root form.
	MetadataURL, MetadataPath string
	// Verify maps an access token to its tenant. Its error's text says which check failed and
	// never holds the token; an error with a method InsufficientScope() bool answering true
	// is a 403 insufficient_scope, with the scopes of its RequiredScopes() []string, if any.
	// It must be safe for concurrent use.
	Verify func(ctx context.Context, token string) (tenant string, err error)
}

// HTTPHandler serves the agents over streamable HTTP: /mcp, /mcp/{agent}, /healthz, /readyz.
func HTTPHandler(options *HTTPOptions) http.Handler {
	var o HTTPOptions
	if options != nil {
		o = *options
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Server == nil || o.Server.StateKeys == nil || o.Server.Room == nil {
		// One key and one Room for every agent's server, as cmd gives them.
		so := Options{}
		if o.Server != nil {
			so = *o.Server
		}
		if so.StateKeys == nil {
			so.StateKeys = RandomStateKeys()
		}
		so.Room = so.room()
		o.Server = &so
	}
	h := &httpHandler{opts: o, agents: map[string]map[string]http.Handler{}}
	for _, a := range o.Agents {
		sh := agentHandler(NewServer(a, o.Server), o)
		if h.agents[a.Tenant] == nil {
			h.agents[a.Tenant] = map[string]http.Handler{}
		}
		h.agents[a.Tenant][a.Name] = sh
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if o.Ready != nil && !o.Ready() {
			http.Error(w, "not ready: a sandbox profile is not ready (run mcp-sandbox doctor)", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	if o.OAuth != nil && o.OAuth.Metadata != nil {
		prm := auth.ProtectedResourceMetadataHandler(o.OAuth.Metadata)
		mux.Handle("/.well-known/oauth-protected-resource", prm)
		if p := o.OAuth.MetadataPath; p != "" && p != "/.well-known/oauth-protected-resource" {
			mux.Handle(p, prm)
		}
	}
	if o.Server.Ledger != nil && o.Operator != nil {
		h.approvalRoutes(mux, o.Server.Room)
		h.programRoutes(mux, o.Server.Ledger)
	}
	mcpRoutes := limitBody(o.MaxBodyBytes, h.authenticated(http.HandlerFunc(h.route)))
	mux.Handle("/mcp", mcpRoutes)
	mux.Handle("/mcp/{agent}", mcpRoutes)
	cop := http.NewCrossOriginProtection()
	return h.hostCheck(cop.Handler(mux))
}

type httpHandler struct {
	opts   HTTPOptions
	agents map[string]map[string]http.Handler // tenant → agent → handler; read-only
}

// hostCheck refuses a foreign Host on a loopback listener (DNS rebinding).
func (h *httpHandler) hostCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.opts.Loopback && !loopbackHost(r.Host) {
			http.Error(w, "forbidden: this server listens on loopback and accepts only a loopback Host header", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authenticated resolves the bearer token to a tenant (a static token, else an OAuth access
// token) and puts it in the request's context as the go-sdk TokenInfo user, which binds each
// session to its tenant. A refusal is logged with its reason, never with the token.
func (h *httpHandler) authenticated(next http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		if tenant, ok := ctx.Value(resolvedKey{}).(string); ok {
			return &auth.TokenInfo{UserID: tenant}, nil
		}
		return nil, auth.ErrInvalidToken
	}
	withToken := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if tenant := h.opts.tokenless(); tenant != "" {
				next.ServeHTTP(w, r.WithContext(withTenant(r.Context(), tenant)))
				return
			}
		}
		token := bearerToken(r)
		if token == "" {
			h.opts.Logger.Warn("request refused: no bearer token", "reason", "no token", "path", r.URL.Path, "remote", r.RemoteAddr)
			h.unauthorized(w, "")
			return
		}
		tenant, err := h.opts.resolve(r.Context(), token)
		if err != nil {
			h.opts.Logger.Warn("request refused: "+err.Error(), "reason", err.Error(), "path", r.URL.Path, "remote", r.RemoteAddr)
			if s, ok := err.(interface{ InsufficientScope() bool }); ok && s.InsufficientScope() {
				h.forbidden(w, err)
				return
			}
			h.unauthorized(w, `error="invalid_token"`)
			return
		}
		withToken.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resolvedKey{}, tenant)))
	})
}

// resolvedKey holds the tenant authenticated resolved, for the go-sdk middleware's verifier.
type resolvedKey struct{}

// errUnknownToken is a token that is neither a static token nor, without OAuth, anything else.
var errUnknownToken = errors.New("token refused: no tenant has this static token")

// resolve is the tenant of a bearer token: a static token's, else an OAuth access token's.
func (o *HTTPOptions) resolve(ctx context.Context, token string) (string, error) {
	if o.Authenticate != nil {
		if tenant, ok := o.Authenticate(token); ok {
			return tenant, nil
		}
	}
	if o.OAuth == nil || o.OAuth.Verify == nil {
		return "", errUnknownToken
	}
	return o.OAuth.Verify(ctx, token)
}

// tokenless is the tenant of a request without an Authorization header, or "".
func (o *HTTPOptions) tokenless() string {
	if o.Tokenless == nil {
		return ""
	}
	return o.Tokenless()
}

// Admits reports whether r carries a credential HTTPHandler accepts, whatever its route: the
// tokenless tenant's request, a tenant's token or OAuth access token (an access token that
// lacks a scope is not), or an operator's token. It is the handler's own decision, for what
// guards its listener (assembly's httpguard.Gate) to hand the connection on; like the options'
// functions, it is safe for concurrent use.
func (o *HTTPOptions) Admits(r *http.Request) bool {
	if r.Header.Get("Authorization") == "" {
		return o.tokenless() != ""
	}
	token := bearerToken(r)
	if token == "" {
		return false
	}
	if o.Operator != nil && o.Operator(token) {
		return true
	}
	_, err := o.resolve(r.Context(), token)
	return err == nil
}

// unauthorized answers 401 with a Bearer challenge: with OAuth, one naming the resource
// metadata (RFC 9728, section 5.1); without, a realm. go-sdk's middleware sends a challenge only with
// OAuth resource metadata, and a client (the MCP Inspector among them) that gets a 401
// without one starts OAuth discovery instead of asking for the token.
func (h *httpHandler) unauthorized(w http.ResponseWriter, params string) {
	if o := h.opts.OAuth; o != nil && o.MetadataURL != "" {
		challenge := fmt.Sprintf("Bearer resource_metadata=%q", o.MetadataURL)
		if params != "" {
			challenge = fmt.Sprintf("Bearer %s, resource_metadata=%q", params, o.MetadataURL)
		}
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, "unauthorized: send an access token for this resource, or the tenant's token, as Authorization: Bearer <token>", http.StatusUnauthorized)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-sandbox"`)
	http.Error(w, "unauthorized: send the tenant's token as Authorization: Bearer <token>", http.StatusUnauthorized)
}

// forbidden answers 403 insufficient_scope (RFC 6750, section 3.1) naming the scopes required.
func (h *httpHandler) forbidden(w http.ResponseWriter, err error) {
	challenge := `Bearer error="insufficient_scope"`
	if s, ok := err.(interface{ RequiredScopes() []string }); ok && len(s.RequiredScopes()) > 0 {
		challenge += fmt.Sprintf(", scope=%q", strings.Join(s.RequiredScopes(), " "))
	}
	if o := h.opts.OAuth; o != nil && o.MetadataURL != "" {
		challenge += fmt.Sprintf(", resource_metadata=%q", o.MetadataURL)
	}
	w.Header().Set("WWW-Authenticate", challenge)
	http.Error(w, "forbidden: the access token lacks a scope this tenant requires", http.StatusForbidden)
}

// bearerToken is the token of an "Authorization: Bearer <token>" header, or "".
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

type tenantKey struct{}

func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

func tenantOf(r *http.Request) string {
	if t, ok := r.Context().Value(tenantKey{}).(string); ok {
		return t
	}
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	return ""
}

func (h *httpHandler) route(w http.ResponseWriter, r *http.Request) {
	tenant := tenantOf(r)
	agents := h.agents[tenant]
	name := r.PathValue("agent")
	if name == "" {
		switch {
		case len(agents) == 1:
			for n := range agents {
				name = n
			}
		case agents[DefaultAgentName] != nil:
			name = DefaultAgentName
		default:
			names := agentNames(agents)
			routeError(w, routeProblem{Error: "no_default_agent", Agents: names,
				Message: fmt.Sprintf("this token's tenant has no default agent (one named %q, or its only agent): use /mcp/{agent}, one of: %s",
					DefaultAgentName, strings.Join(names, ", "))})
			return
		}
	}
	sh, ok := agents[name]
	if !ok {
		// Another tenant's agent reads exactly like one nobody has (the answer names what was
		// asked for and the caller's own agents, nothing else), so agent names cannot be
		// probed across tenants.
		names := agentNames(agents)
		routeError(w, routeProblem{Error: "unknown_agent", Agent: name, Agents: names,
			Message: fmt.Sprintf("this token's tenant has no agent %q: use /mcp/{agent}, one of: %s", name, strings.Join(names, ", "))})
		return
	}
	sh.ServeHTTP(w, r)
}

// routeProblem is the JSON body of a 404 from /mcp or /mcp/{agent}: what is missing, named,
// so that a person trying a URL by hand sees what to change rather than "Not Found".
type routeProblem struct {
	Error   string   `json:"error"` // no_default_agent | unknown_agent
	Message string   `json:"message"`
	Agent   string   `json:"agent,omitempty"` // the agent asked for
	Agents  []string `json:"agents"`          // the caller's own agents
}

func routeError(w http.ResponseWriter, p routeProblem) {
	if p.Agents == nil {
		p.Agents = []string{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(p)
}

func agentNames(agents map[string]http.Handler) []string {
	return slices.Sorted(maps.Keys(agents))
}

// limitBody bounds the request body at limit bytes before anything reads it, answering 413
// at once when Content-Length already says it is larger.
func limitBody(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			http.Error(w, "the request body is too large", http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}
