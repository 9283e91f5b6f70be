# Convenience targets; .ci/run is what CI runs.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

.PHONY: install test ci demo fmt vet
# Installs wsfs as $(DESTDIR)$(PREFIX)/bin/wsfs (default /usr/local/bin/wsfs)
# with its version stamped in.
PREFIX ?= /usr/local
install:
	mkdir -p $(DESTDIR)$(PREFIX)/bin
	go build -ldflags "-X main.version=$(VERSION)" -o $(DESTDIR)$(PREFIX)/bin/wsfs ./cmd/wsfs
test:
	bash hack/ci-setup.sh && go test -race -count=1 -timeout 60m ./... && (cd clients/typescript && npm test)
ci:
	bash .ci/run
demo:
	bash hack/demo.sh
fmt:
	gofmt -w .
vet:
	go vet ./...
