# Builds clusterflow (every command; its `dev` needs cmd/clusterflow-dev, which the image
# leaves out: it runs against the compose file's Temporal server) and clusterflow-host (the
# same without `dev`: what the hosts run) and ships them on a slim Debian: startscripts run
# in the worker's container and need a shell and coreutils.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./cmd/clusterflow ./cmd/clusterflow-host

FROM debian:bookworm-slim
# tini is PID 1: it reaps the zombies that scripts' orphaned children leave, which the worker
# would not, and passes signals on.
RUN apt-get update && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /var/lib/clusterflow clusterflow \
    && chmod 0700 /var/lib/clusterflow
COPY --from=build /out/clusterflow /out/clusterflow-host /usr/local/bin/
# Never root: startscripts run as the worker's user.
USER clusterflow
WORKDIR /var/lib/clusterflow
ENTRYPOINT ["/usr/bin/tini", "--", "clusterflow"]
CMD ["worker", "--data", "/var/lib/clusterflow"]
