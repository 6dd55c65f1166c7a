# mcp-sandbox: the targets a newcomer and CI use. `make help` lists them.
GO      ?= go
BIN     := bin/mcp-sandbox
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early.Version=$(VERSION)

.PHONY: help build helper-overlays run race-cc test integration conformance test-all check cross fuzz bench soak clean image-runtime sandbox-image images dist npm wheel bundle

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
FAST_PKGS   := . ./binding ./approval ./egress ./budget ./cassette ./budget/sqlite ./budget/postgres ./configs ./engine ./execution ./engine/sandboxtest ./engine/wire ./failure ./internal/gate ./internal/owner ./internal/cgroup ./internal/identity ./internal/pgdb ./internal/python ./internal/spawn ./internal/launch/seccomp ./internal/userns ./internal/tokenconn ./internal/nearest ./internal/httpguard ./mcpserver ./mcpserver/oauthrs ./outputs ./outputs/pgblob ./upstream ./upstream/oauthclient ./toolshape ./programs ./telemetry ./metrics
INTEG_PKGS  := ./engine/backend/... ./remote/... ./engine/bootstrap ./internal/launch ./internal/inithelper/... ./assembly ./cmd/... ./tools/... ./benchmarks
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
	@echo "                  checksums.txt in dist/ (nothing published)"
	@echo "make npm          dist/npm: the npm packages (npx -y @mcp-sandbox/mcp-sandbox serve), from dist/'s binaries"
	@echo "make wheel        dist/wheels: a Python wheel per platform (uvx mcp-sandbox serve), from dist/'s binaries"
	@echo "make bundle       mcp-sandbox.mcpb, the MCP Bundle Claude Desktop installs, from dist/'s binaries"
	@echo "                  (npm ci --prefix deploy/mcpb --no-audit --no-fund once first)"
	@echo "make sandbox-image  build the container backend's image, $(SANDBOX_IMAGE):<version> and"
	@echo "                  :latest from this host's Python with podman or docker, pulling nothing"
	@echo "make images       the server and worker images deploy/kubernetes names, the same way"

# The init helper alone, built for the target and embedded through an overlay (the one recipe
# make dist and the tests' builds use too: internal/inithelper/overlay). A
# plain `go build` embeds none, and that binary execs itself as its helper (docs/design.md §19.1).
HELPER_OVERLAY = $(GO) run ./internal/inithelper/overlay
HELPER_DIR     := bin/init-helper

# It says on stderr what it does: a first build downloads the modules and compiles for minutes
# (-v names each package as it compiles; a build from the cache names none).
build:
	@echo "make build: $(BIN) $(VERSION); the first build downloads Go modules and compiles for a few minutes, naming each package, later ones take seconds" >&2
	$(HELPER_OVERLAY) -goos $$($(GO) env GOOS) -goarch $$($(GO) env GOARCH) -o $(HELPER_DIR)
	$(GO) build -v -overlay $(HELPER_DIR)/overlay.json -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/mcp-sandbox

# Under stdio, stdout carries MCP frames only: the build (its commands, make's echo, the note
# that a first build takes minutes) goes to stderr.
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
# Each is built (the binary, then every package) and vetted. -trimpath and cgo off (as when
# cross-compiling) are make dist's flags: its darwin/amd64 and windows/amd64 builds then find
# these packages in the build cache.
CROSS := GOFLAGS=-trimpath CGO_ENABLED=0
cross:
	$(CROSS) GOOS=darwin GOARCH=amd64 $(GO) build -o /dev/null ./cmd/mcp-sandbox
	$(CROSS) GOOS=darwin GOARCH=amd64 $(GO) build ./...
	$(CROSS) GOOS=darwin GOARCH=amd64 $(GO) vet ./...
	$(CROSS) GOOS=darwin GOARCH=amd64 $(GO) test -c -o /dev/null ./engine/backend/seatbelt
	$(CROSS) GOOS=darwin GOARCH=amd64 $(GO) test -c -o /dev/null ./engine/backend/container
	$(CROSS) GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/mcp-sandbox
	$(CROSS) GOOS=windows GOARCH=amd64 $(GO) build ./...
	$(CROSS) GOOS=windows GOARCH=amd64 $(GO) vet ./...
	$(CROSS) GOOS=windows GOARCH=amd64 $(GO) test -c -o /dev/null ./engine/backend/jobobject
	$(CROSS) GOOS=windows GOARCH=amd64 $(GO) test -c -o /dev/null ./engine/backend/container

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
	$(GO) test ./remote -run '^$$' -fuzz '^FuzzStream$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./toolshape -run '^$$' -fuzz '^FuzzSchema$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
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

# An install without Go: one binary per target, built as `make build` builds it but without cgo
# and symbol tables, packed with what the README tells its users to copy, and checksums.txt
# (tools/release). A tagged commit (vX.Y.Z) is version X.Y.Z; any other is a
# snapshot named after the commit.
DIST_VERSION ?= $(shell v=$$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null) && echo $${v\#v} || echo 0.0.0-snapshot-$(VERSION))
DIST_FILES   := README.md deploy/mcpb/config.yaml=config.yaml bin/archive/ABOUT.txt=ABOUT.txt
MCPB         := deploy/mcpb/node_modules/.bin/mcpb

# Each target's overlay embeds the init helper built for it (darwin's and windows' replace nothing).
helper-overlays:
	for t in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do \
	  $(HELPER_OVERLAY) -goos $${t%/*} -goarch $${t#*/} -o $(HELPER_DIR)/$${t%/*}_$${t#*/} || exit 1; done

# Each archive holds the binary, the README, the desktop config and ABOUT.txt (where it comes
# from), checked after the archives are written.
dist: helper-overlays
	@mkdir -p bin/archive && printf '%s\n' "mcp-sandbox $(DIST_VERSION)" "" \
	  "Built by make dist from commit $$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
	  "of https://github.com/mcp-sandbox/mcp-sandbox, on $$(date -u +%Y-%m-%d)." \
	  "Check this archive against the checksums.txt made with it (sha256sum -c checksums.txt)." "" \
	  "mcp-sandbox     the server (mcp-sandbox --help; mcp-sandbox version says its version)" \
	  "config.yaml     the configuration Claude Desktop serves with on macOS and Windows (README.md," \
	  "                \"Claude Desktop on macOS\" and \"on Windows\"): the embedded default with allow_same_uid" \
	  "README.md       the project's README" > bin/archive/ABOUT.txt
	$(GO) run ./tools/release -version $(DIST_VERSION) -o dist -overlays $(HELPER_DIR) \
		-ldflags "-s -w -X github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early.Version=$(DIST_VERSION)" $(DIST_FILES)
	@cd dist && ls *.tar.gz *.zip checksums.txt && sha256sum --quiet -c checksums.txt
	@n=$$(ls dist/*.tar.gz dist/*.zip | wc -l); [ "$$n" = 6 ] || { echo "dist/ holds $$n archives, want 6" >&2; exit 1; }
	@for a in dist/*.tar.gz dist/*.zip; do \
	  case $$a in *.zip) list=$$(python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$$a") ;; \
	  *) list=$$(tar tzf "$$a") ;; esac; \
	  for f in README.md config.yaml ABOUT.txt; do echo "$$list" | grep -qxE "(\./)?$$f" || { echo "$$a lacks $$f" >&2; exit 1; }; done; \
	done

# The packages MCP users install with the package managers they have, from dist/'s binaries
# (run make dist first; nothing is rebuilt or fetched): npm's in dist/npm (a platform package
# per target and the launcher that depends on them, packed by npm pack; npx -y
# @mcp-sandbox/mcp-sandbox serve), Python's in dist/wheels (a wheel per target carrying the
# binary as a script; uvx mcp-sandbox serve). docs/design.md §21.
PACKAGES = $(GO) run ./tools/packages -dist dist
npm:
	@test -f dist/artifacts.json || { echo "no dist/artifacts.json: make dist first" >&2; exit 1; }
	$(PACKAGES) -npm dist/npm
	@for d in dist/npm/*/; do npm pack --silent --pack-destination dist/npm "./$$d" >/dev/null || exit 1; done
	@ls dist/npm/*.tgz
wheel:
	@test -f dist/artifacts.json || { echo "no dist/artifacts.json: make dist first" >&2; exit 1; }
	$(PACKAGES) -wheels dist/wheels

# The bundle is packed from dist/'s binaries: run make dist first (make bundle does not
# rebuild them). The staged manifest is validated, then packed, by the official mcpb CLI.
bundle:
	@test -x $(MCPB) || { echo "no $(MCPB): npm ci --prefix deploy/mcpb --no-audit --no-fund" >&2; exit 1; }
	@test -f dist/artifacts.json || { echo "no dist/artifacts.json: make dist first" >&2; exit 1; }
	node deploy/mcpb/stage.mjs dist dist/mcpb
	$(MCPB) validate dist/mcpb/manifest.json
	$(MCPB) pack dist/mcpb mcp-sandbox.mcpb

# The container backend's image, and the two deploy/kubernetes runs: root filesystems assembled
# from this host's files (the interpreter, its libraries and standard library; the binary just
# built), imported by the runtime and tried once. Nothing is pulled. `mcp-sandbox image build`
# does the work (docs/design.md §20), so an archive's binary needs no source tree for it.
SANDBOX_RUNTIME ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)
SANDBOX_PYTHON  ?= /usr/bin/python3
SANDBOX_IMAGE   ?= localhost/mcp-sandbox-python
IMAGE_BUILD      = ./$(BIN) image build --runtime "$(SANDBOX_RUNTIME)" --python $(SANDBOX_PYTHON)
image-runtime:
	@test -n "$(SANDBOX_RUNTIME)" || { echo "no podman or docker on PATH: apt-get install podman" >&2; exit 1; }
sandbox-image: image-runtime build
	$(IMAGE_BUILD) --tag $(SANDBOX_IMAGE):$(VERSION) --tag $(SANDBOX_IMAGE):latest

# The server and worker images deploy/kubernetes names (localhost/mcp-sandbox-server and
# -worker, :<version> and :latest), with this build's binary.
images: image-runtime build
	$(IMAGE_BUILD) --image server
	$(IMAGE_BUILD) --image worker
