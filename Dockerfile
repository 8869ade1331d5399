# Builds clusterflow (every command; its `dev` needs cmd/clusterflow-dev, which the image
# leaves out: it runs against the compose file's Temporal server) and clusterflow-host (the
# same without `dev`: what the hosts run) and ships them on a slim Debian: startscripts run
# in the host's container and need a shell and coreutils.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./cmd/clusterflow ./cmd/clusterflow-host

FROM debian:bookworm-slim
# tini is PID 1: it reaps the zombies that scripts' orphaned children leave, which the worker
# would not, and passes signals on. libnss-systemd resolves the clusters' script users,
# whose records the agent writes in /run/userdb.
RUN apt-get update && apt-get install -y --no-install-recommends tini libnss-systemd \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin clusterflow \
    && install -d -m 0711 -o root -g root /var/lib/clusterflow
COPY --from=build /out/clusterflow /out/clusterflow-host /usr/local/bin/
COPY deploy/docker/host.sh /usr/local/bin/clusterflow-host.sh
# A host (clusterflow-host.sh, as the compose file runs it) starts as root to run its agent,
# which alone may act as the clusters' script users, with only the capabilities the
# container is granted, and runs its worker as clusterflow with none. Every other command of
# the image runs as clusterflow.
USER clusterflow
WORKDIR /tmp
ENTRYPOINT ["/usr/bin/tini", "--", "clusterflow"]
CMD ["--help"]
