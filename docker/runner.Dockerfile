# syntax=docker/dockerfile:1
# The dcs runner image (the data plane). Build from the repository root:
#   docker build -f docker/runner.Dockerfile -t dcs-runner:0.1.0 .
# Built with --no-default-features, whatever the defaults: the `demo` feature (the `demo`
# subcommand with its embedded Doris emulator, tests/doris-emu; off by default) is never in the
# image. See docker/README.md.

FROM rust:1-bookworm AS build
WORKDIR /src
# zlib (flate2 through mysql_async) is built in and linked statically: the distroless runtime
# has no libz.so.1.
ENV LIBZ_SYS_STATIC=1 \
    CARGO_TERM_COLOR=never
# librdkafka (the Kafka client) is built from its bundled source: cmake, and curl's headers
# (included even with curl left out). It links OpenSSL, which the runtime image has.
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake libcurl4-openssl-dev libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target,id=dcs-target \
    cargo build --release --locked -p dcs-runner --no-default-features --features kafka --bin dcs-runner \
    && install -D -m 0755 target/release/dcs-runner /out/dcs-runner

# glibc + libgcc, CA certificates, no shell, uid/gid 65532 ("nonroot").
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="dcs-runner" \
      org.opencontainers.image.description="The dcs data plane: snapshot, then changelog, into a sink with checkpoints" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/dcs-runner /usr/local/bin/dcs-runner
USER 65532:65532
# The operator's Deployment/Job passes only args (`run -f /etc/dcs/sync.yaml`).
ENTRYPOINT ["/usr/local/bin/dcs-runner"]
