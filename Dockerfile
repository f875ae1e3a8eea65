# Images of fleetq-manager and fleetq-agent; `make image` builds both (targets fleetq-manager and
# fleetq-agent). The binaries come from `make build`, the target the tests use, built statically
# (CGO_ENABLED=0), and run from a distroless static base as a non-root user with nothing else in the
# image. Building needs a Docker engine and access to the base images' registries.
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build BIN=/out

FROM ${BASE_IMAGE} AS fleetq-manager
COPY --from=build /out/fleetq-manager /fleetq-manager
USER 65532:65532
ENTRYPOINT ["/fleetq-manager"]

FROM ${BASE_IMAGE} AS fleetq-agent
COPY --from=build /out/fleetq-agent /fleetq-agent
USER 65532:65532
ENTRYPOINT ["/fleetq-agent"]
