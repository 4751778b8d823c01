# gpuportal — see README.md.
GO ?= go

.PHONY: run test check build generate vendor-assets bench clean

## run: the portal with a demo fleet at http://127.0.0.1:8080 (logins printed)
run:
	$(GO) run ./cmd/portal --demo --migrate --db data/portal.db

## test: the whole suite, with the race detector
test:
	$(GO) test -race -count=1 ./...

## check: formatting, vet, staticcheck, and generated templates up to date
check: generate
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	git diff --exit-code -- '*_templ.go'
	@test -z "$$(git ls-files --others --exclude-standard -- '*_templ.go')" || (echo "untracked generated files:"; git ls-files --others --exclude-standard -- '*_templ.go'; exit 1)

## build: the binaries into bin/ (the portal is pure Go: CGO_ENABLED=0)
build:
	CGO_ENABLED=0 $(GO) build -o bin/portal ./cmd/portal

## generate: templ components → *_templ.go (committed)
generate:
	$(GO) tool templ generate

## bench: the speed targets of DESIGN §7
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

## vendor-assets: refresh htmx and Pico CSS from the npm registry (versions in web/static/VERSIONS.md)
vendor-assets:
	rm -rf tmp/npm && mkdir -p tmp/npm
	cd tmp/npm && npm pack htmx.org@2.0.11 @picocss/pico@2.1.1 >/dev/null
	tar -xzf tmp/npm/htmx.org-2.0.11.tgz -C tmp/npm package/dist/htmx.min.js
	cp tmp/npm/package/dist/htmx.min.js web/static/htmx.min.js
	tar -xzf tmp/npm/picocss-pico-2.1.1.tgz -C tmp/npm package/css/pico.min.css
	cp tmp/npm/package/css/pico.min.css web/static/pico.min.css
	rm -rf tmp/npm

clean:
	rm -rf bin tmp
