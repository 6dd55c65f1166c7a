# mcp-sandbox: the targets a newcomer and CI use. `make help` lists them.
GO      ?= go
BIN     := bin/mcp-sandbox
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early.Version=$(VERSION)

.PHONY: help build helper-overlays run race-cc test integration conformance test-all check cross fuzz bench soak clean sandbox-image dist bundle

# The tests come in three layers, each with its own timeout:
#   test         fast, on any machine, no root, no Python: the packages that fake what they
#                drive (the engine's protocol loop, the MCP face, bindings, meters, outputs,
#                configs, upstreams over loopback) and the house rules (meta_test.go).
#   integration  root and namespaces: each backend's contract suite with hostile programs in
#                the tests' own pid namespace, the command end to end, the benchmarks' harness.
#   conformance  the built binary driven by real MCP clients and npm peers (run
#                `npm ci --prefix conformance --no-audit --no-fund` once first), and the nested
#                test modules vetted and tested.
# CI (.ci/run) runs all three; `make test-all` does the same here.
FAST_PKGS   := . ./binding ./approval ./egress ./budget ./cassette ./budget/sqlite ./budget/postgres ./configs ./engine ./execution ./engine/sandboxtest ./engine/wire ./failure ./internal/gate ./internal/owner ./internal/cgroup ./internal/identity ./internal/pgdb ./internal/python ./internal/spawn ./internal/launch/seccomp ./internal/userns ./internal/tokenconn ./internal/nearest ./mcpserver ./mcpserver/oauthrs ./outputs ./outputs/pgblob ./upstream ./upstream/oauthclient ./telemetry ./metrics
INTEG_PKGS  := ./engine/backend/... ./engine/bootstrap ./internal/launch ./cmd/... ./benchmarks
NESTED      := conformance/mcpgoclient conformance/mockupstream
# The race detector needs cgo, so a C compiler: `make test RACE=` runs the fast layer without.
RACE                ?= -race
TEST_TIMEOUT        ?= 10m
INTEGRATION_TIMEOUT ?= 25m
CONFORMANCE_TIMEOUT ?= 20m

help:
	@echo "make build        build $(BIN)"
	@echo "make run          build and serve over stdio on the embedded default config"
	@echo "make test         the fast tests: any machine, no root (the race detector on)"
	@echo "make integration  the backends' contract suites and the command end to end (root)"
	@echo "make conformance  the built binary against real MCP clients and npm peers"
	@echo "make test-all     all three layers, as CI runs them"
	@echo "make check        gofmt, go vet (linux, darwin, windows), staticcheck (when installed) and make test"
	@echo "make fuzz         run each fuzz target for a short while"
	@echo "make bench        measure, beside baselines taken in the same loop: execution latency per"
	@echo "                  backend, back-to-back run_code over stdio, throughput over HTTP, run's"
	@echo "                  cold start, binding calls, the server's memory, a forkserver's floor,"
	@echo "                  the context a model reads with and without run_code, and the run"
	@echo "                  ledger on PostgreSQL beside SQLite (PostgreSQL figures need"
	@echo "                  MCP_SANDBOX_TEST_PG_DSN, as the tests do)"
	@echo "make soak         10,000 executions through the MCP face, then fds, goroutines, temporary"
	@echo "                  directories, cgroups and mounts must be where they started (CI runs 120)"
	@echo "make dist         release archives for linux, darwin and windows (amd64, arm64) and"
	@echo "                  checksums.txt in dist/, with goreleaser $(GORELEASER_VERSION) (snapshot: nothing published)"
	@echo "make bundle       mcp-sandbox.mcpb, the MCP Bundle Claude Desktop installs, from dist/'s binaries"
	@echo "                  (npm ci --prefix deploy/mcpb --no-audit --no-fund once first)"
	@echo "make sandbox-image  build the container backend's image, $(SANDBOX_IMAGE):<version> and"
	@echo "                  :latest from this host's Python with podman or docker, pulling nothing"

# The init helper alone, built for the target and embedded through an overlay (the one recipe
# make dist and the tests' builds use too: cmd/mcp-sandbox/internal/inithelper/overlay). A
# plain `go build` embeds none, and that binary execs itself as its helper (docs/design.md §19.1).
HELPER_OVERLAY = $(GO) run ./cmd/mcp-sandbox/internal/inithelper/overlay
HELPER_DIR     := bin/init-helper

build:
	$(HELPER_OVERLAY) -goos $$($(GO) env GOOS) -goarch $$($(GO) env GOARCH) -o $(HELPER_DIR)
	$(GO) build -overlay $(HELPER_DIR)/overlay.json -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/mcp-sandbox

# Silent: under stdio, stdout carries MCP frames only, so not even make's echo may land there.
run:
	@$(MAKE) --no-print-directory build 1>&2
	@exec ./$(BIN) serve

# deploy/k8stest is a module of its own (k8s.io/api stays out of the main one): the
# Kubernetes manifests, strict-decoded and cross-checked.
K8STEST := deploy/k8stest

# all-of runs every command it is given (each a quoted string), whatever failed before it,
# then fails naming those that failed: one failing package or module hides no other's result.
define all-of
@failed=""; for c in $(1); do echo "$$c"; (eval "$$c") || failed="$$failed  $$c\n"; done; \
	if [ -n "$$failed" ]; then printf "make $@: these failed:\n%b" "$$failed" >&2; exit 1; fi
endef

# The race detector's C compiler is checked first, so its absence is said, not a cgo error.
race-cc:
	@if [ -n "$(RACE)" ] && ! command -v "$$($(GO) env CC)" >/dev/null 2>&1; then \
	  echo "the race detector needs a C compiler ($$($(GO) env CC) is not installed): apt-get install gcc, or run make $(MAKECMDGOALS) RACE=" >&2; exit 1; fi

test: race-cc
	$(call all-of,"$(GO) test $(RACE) -count=1 -timeout $(TEST_TIMEOUT) $(FAST_PKGS)" \
		"cd $(K8STEST) && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...")

integration: race-cc
	$(GO) test $(RACE) -count=1 -timeout $(INTEGRATION_TIMEOUT) $(INTEG_PKGS)

conformance:
	$(call all-of,$(foreach m,$(NESTED),"cd $(m) && $(GO) vet ./... && $(GO) test -count=1 ./...") \
		"$(GO) test -count=1 -timeout $(CONFORMANCE_TIMEOUT) ./conformance/...")

# Every layer runs, whatever an earlier one did; the target fails if any did.
test-all:
	$(call all-of,"$(MAKE) test" "$(MAKE) integration" "$(MAKE) conformance")

# Both other platforms must keep building: the local backends are Linux's, the rest is not.
# Each is built (the binary, then every package) and vetted.
cross:
	GOOS=darwin $(GO) build -o /dev/null ./cmd/mcp-sandbox
	GOOS=darwin $(GO) build ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=darwin $(GO) test -c -o /dev/null ./engine/backend/seatbelt
	GOOS=darwin $(GO) test -c -o /dev/null ./engine/backend/container
	GOOS=windows $(GO) build -o /dev/null ./cmd/mcp-sandbox
	GOOS=windows $(GO) build ./...
	GOOS=windows $(GO) vet ./...
	GOOS=windows $(GO) test -c -o /dev/null ./engine/backend/jobobject
	GOOS=windows $(GO) test -c -o /dev/null ./engine/backend/container

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	$(GO) vet ./...
	$(MAKE) cross
	cd $(K8STEST) && $(GO) vet ./...
	@if command -v staticcheck >/dev/null 2>&1; then staticcheck ./...; else echo "staticcheck not installed: skipped"; fi
	$(MAKE) test

# A count of executions, not a duration: a -fuzztime duration races Go's
# fuzz coordinator at its deadline (go.dev/issue/75804, fixed in Go 1.27)
# and fails a target that found nothing on a loaded machine.
FUZZTIME ?= 20000x
fuzz:
	$(GO) test ./engine/wire -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./engine/wire -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./configs -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./outputs -run '^$$' -fuzz '^FuzzPreview$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./outputs -run '^$$' -fuzz '^FuzzWindows$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./engine/backend/remote -run '^$$' -fuzz '^FuzzStream$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./upstream -run '^$$' -fuzz '^FuzzSchema$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./upstream -run '^$$' -fuzz '^FuzzV1Answer$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./mcpserver -run '^$$' -fuzz '^FuzzOpenState$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./engine/backend/container -run '^$$' -fuzz '^FuzzStreamsDemux$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x

bench:
	$(GO) test ./benchmarks -run TestReport -count=1 -v -bench-report -timeout 30m

SOAK_EXECUTIONS ?= 10000
soak:
	$(GO) test ./benchmarks -run '^TestSoak$$' -count=1 -v -timeout 120m -soak-executions $(SOAK_EXECUTIONS)

clean:
	rm -rf bin dist mcp-sandbox.mcpb

# An install without Go. goreleaser is installed through the Go module proxy into bin/ the
# first time (GORELEASER=path uses another); DIST_PARALLELISM bounds its concurrent builds
# (CI runs them one at a time on a shared machine).
GORELEASER_VERSION ?= v2.15.1
GORELEASER         ?= bin/goreleaser-$(GORELEASER_VERSION)
DIST_PARALLELISM   ?= 0
MCPB               := deploy/mcpb/node_modules/.bin/mcpb

$(GORELEASER):
	GOBIN=$(CURDIR)/bin/goreleaser-tmp $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)
	mv bin/goreleaser-tmp/goreleaser $(GORELEASER) && rmdir bin/goreleaser-tmp

# goreleaser builds each target with bin/init-helper/<os>_<arch>/overlay.json (.goreleaser.yaml).
helper-overlays:
	for t in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do \
	  $(HELPER_OVERLAY) -goos $${t%/*} -goarch $${t#*/} -o $(HELPER_DIR)/$${t%/*}_$${t#*/} || exit 1; done

dist: $(GORELEASER) helper-overlays
	MCP_SANDBOX_VERSION=$(VERSION) $(GORELEASER) release --snapshot --clean $(if $(filter-out 0,$(DIST_PARALLELISM)),--parallelism $(DIST_PARALLELISM))
	@cd dist && ls *.tar.gz *.zip checksums.txt && sha256sum --quiet -c checksums.txt
	@n=$$(ls dist/*.tar.gz dist/*.zip | wc -l); [ "$$n" = 6 ] || { echo "dist/ holds $$n archives, want 6" >&2; exit 1; }

# The bundle is packed from dist/'s binaries: run make dist first (make bundle does not
# rebuild them). The staged manifest is validated, then packed, by the official mcpb CLI.
bundle:
	@test -x $(MCPB) || { echo "no $(MCPB): npm ci --prefix deploy/mcpb --no-audit --no-fund" >&2; exit 1; }
	@test -f dist/artifacts.json || { echo "no dist/artifacts.json: make dist first" >&2; exit 1; }
	node deploy/mcpb/stage.mjs dist dist/mcpb
	$(MCPB) validate dist/mcpb/manifest.json
	$(MCPB) pack dist/mcpb mcp-sandbox.mcpb

# The container backend's image: a root filesystem assembled from this host's interpreter, its
# libraries and standard library, imported by the runtime. Nothing is pulled.
SANDBOX_RUNTIME ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)
SANDBOX_PYTHON  ?= /usr/bin/python3
SANDBOX_IMAGE   ?= localhost/mcp-sandbox-python
sandbox-image:
	@test -n "$(SANDBOX_RUNTIME)" || { echo "no podman or docker on PATH: apt-get install podman" >&2; exit 1; }
	engine/backend/container/image/build.sh $(SANDBOX_RUNTIME) $(SANDBOX_PYTHON) $(SANDBOX_IMAGE) $(VERSION) latest
