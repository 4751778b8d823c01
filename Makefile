# gpuportal — see README.md.
GO ?= go
# go-nvml's cgo prologue uses deprecated NVML calls; keep the build quiet.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: run test check lint-openapi build generate vendor-assets bench fuzz screenshots clean

## run: the portal with a demo fleet (6 simulated DGX nodes) at http://127.0.0.1:8080 (logins printed);
## make run PORTAL_DB=postgres://… runs it on PostgreSQL instead of data/portal.db
PORTAL_DB ?= data/portal.db
run: build
	bin/portal --demo --migrate --db '$(PORTAL_DB)'

## test: the whole suite, with the race detector (and on PostgreSQL too with PORTAL_TEST_POSTGRES)
# RACE_FLAGS: modernc.org's SQLite engine is C translated to Go (its lib,
# libc, memory and mathutil packages); instrumenting it for the race
# detector made every query about 20 times slower (a simulated day: 0.9 s
# plain, 18 s under -race) and checks no code of ours. Our code,
# database/sql and both drivers (modernc.org/sqlite's Go side, pgx) stay
# instrumented.
RACE_FLAGS = -race $(foreach p,modernc.org/sqlite/lib modernc.org/libc/... modernc.org/memory modernc.org/mathutil,-gcflags=$(p)=-race=false)
# GPUPORTAL_BUILD_FLAGS: e2e builds the portal it runs as a process with
# the suite's own flags, so its packages come out of the build cache the
# test binaries filled (built apart, without -race, they were compiled a
# second time: 176 CPU-seconds from an empty cache), and that process runs
# under the race detector too.
# -vet=off: go test would vet every package it builds, and the packages
# they import for facts (62 CPU-seconds from an empty build cache, a sixth
# of the suite's compiling); `make check` runs the whole of go vet, of which
# go test's checks are a part.
test:
	@test -n "$$PORTAL_TEST_POSTGRES" || echo "make test: the PostgreSQL runs are skipped: PORTAL_TEST_POSTGRES is not set (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)"
	GPUPORTAL_BUILD_FLAGS='$(RACE_FLAGS)' $(GO) test $(RACE_FLAGS) -vet=off -count=1 -timeout 20m ./...

## check: formatting, vet, staticcheck, generated templates up to date, no binaries committed
# go vet builds with the suite's flags: the packages it compiles to vet
# are then the very ones make test runs (CI runs check first), where built
# without -race they were compiled twice.
check: generate
	bash .ci/no-binaries
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(RACE_FLAGS) ./...
	$(GO) tool staticcheck ./...
	git diff --exit-code -- '*_templ.go'
	@test -z "$$(git ls-files --others --exclude-standard -- '*_templ.go')" || (echo "untracked generated files:"; git ls-files --others --exclude-standard -- '*_templ.go'; exit 1)
	$(MAKE) lint-openapi

## lint-openapi: the OpenAPI document through Redocly's linter (recommended rules): zero errors, zero warnings
REDOCLY_VERSION = 2.77.0
REDOCLY = tmp/redocly-$(REDOCLY_VERSION)/node_modules/.bin/redocly
lint-openapi: $(REDOCLY)
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(REDOCLY) lint --config web/openapi/redocly.yaml --max-problems 1000 web/openapi/openapi.json 2>&1 | grep -v '║\|╔\|╚' | tee tmp/redocly.log
	@grep -q "Your API description is valid" tmp/redocly.log && ! grep -qE "You have [0-9]+ warning" tmp/redocly.log || (echo "openapi.json: fix the linter's findings above"; exit 1)

$(REDOCLY):
	mkdir -p tmp/redocly-$(REDOCLY_VERSION)
	cd tmp/redocly-$(REDOCLY_VERSION) && npm install --no-audit --no-fund --no-save --loglevel=error @redocly/cli@$(REDOCLY_VERSION)

## build: the binaries into bin/ (the portal is pure Go; the agent needs cgo for NVML; its SFTP helper is static)
build:
	CGO_ENABLED=0 $(GO) build -o bin/portal ./cmd/portal
	$(GO) build -o bin/agent ./cmd/agent
	CGO_ENABLED=0 $(GO) build -o bin/gpuportal-sftp ./cmd/gpuportal-sftp
	CGO_ENABLED=0 $(GO) build -o bin/gpu ./cmd/gpu

## generate: templ components → *_templ.go (committed)
generate:
	$(GO) tool templ generate

## bench: the speed targets of DESIGN §7
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

## fuzz: each parser's fuzz target for FUZZTIME (DESIGN §8; make test runs their seeds)
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseSSHKey$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzCleanVolumePath$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzParseBookingJSON$$' -fuzztime $(FUZZTIME) ./web
	$(GO) test -run '^$$' -fuzz '^FuzzAgentProtocolJSON$$' -fuzztime $(FUZZTIME) ./web
	$(GO) test -run '^$$' -fuzz '^FuzzStreamFrames$$' -fuzztime $(FUZZTIME) ./sessions/stream

## screenshots: the main pages at 1280 and 390 px, in English and Chinese, into tmp/screenshots (needs Chromium)
screenshots:
	GPUPORTAL_SCREENSHOTS=$(CURDIR)/tmp/screenshots $(GO) test -count=1 -run '^TestScreenshots$$' -v ./web/

## vendor-assets: refresh htmx, Pico CSS, xterm.js (web/static/VERSIONS.md) and the tests' axe-core (web/testdata/VERSIONS.md) from the npm registry
vendor-assets:
	rm -rf tmp/npm && mkdir -p tmp/npm
	cd tmp/npm && npm pack htmx.org@2.0.11 @picocss/pico@2.1.1 axe-core@4.14.1 @xterm/xterm@6.0.0 @xterm/addon-fit@0.11.0 >/dev/null
	tar -xzf tmp/npm/htmx.org-2.0.11.tgz -C tmp/npm package/dist/htmx.min.js
	cp tmp/npm/package/dist/htmx.min.js web/static/htmx.min.js
	tar -xzf tmp/npm/picocss-pico-2.1.1.tgz -C tmp/npm package/css/pico.min.css
	cp tmp/npm/package/css/pico.min.css web/static/pico.min.css
	tar -xzf tmp/npm/xterm-xterm-6.0.0.tgz -C tmp/npm package/lib/xterm.js package/css/xterm.css
	cp tmp/npm/package/lib/xterm.js web/static/xterm.js
	cp tmp/npm/package/css/xterm.css web/static/xterm.css
	tar -xzf tmp/npm/xterm-addon-fit-0.11.0.tgz -C tmp/npm package/lib/addon-fit.js
	cp tmp/npm/package/lib/addon-fit.js web/static/xterm-addon-fit.js
	tar -xzf tmp/npm/axe-core-4.14.1.tgz -C tmp/npm package/axe.min.js package/LICENSE
	cp tmp/npm/package/axe.min.js web/testdata/axe.min.js
	cp tmp/npm/package/LICENSE web/testdata/axe-LICENSE
	rm -rf tmp/npm

clean:
	rm -rf bin tmp
