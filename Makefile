GO ?= go
PKGS ?= ./...

.PHONY: run test bench lint soak fmt

run:
	$(GO) run ./cmd/gatehouse

# test is the one command CI runs: vet, then every test under the race detector.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 $(PKGS) | tee bench.txt

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')
