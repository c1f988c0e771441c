# syntax=docker/dockerfile:1
#
# One image for the controller and the provider binaries:
#   /usr/local/bin/dra-autoscaler      (`dra-autoscaler run`, the default command)
#   /usr/local/bin/dra-provider-fake   (the fake cloud provider)
#   /usr/local/bin/dra-provider-aws    (the AWS provider: Auto Scaling groups)
#   /usr/local/bin/dra-provider-gce    (the GCE provider: managed instance groups)
# The runtime stage is distroless, runs as an unprivileged user and needs no
# writable path, so it works with readOnlyRootFilesystem (the chart mounts an
# emptyDir at /tmp only for good measure).

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Dependencies first, so a source change does not refetch the registry.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY cloudproviders ./cloudproviders
COPY e2e ./e2e
COPY benches ./benches
COPY testdata ./testdata
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p dra-autoscaler -p dra-provider-fake -p dra-provider-aws -p dra-provider-gce \
 && mkdir -p /out \
 && cp target/release/dra-autoscaler target/release/dra-provider-fake target/release/dra-provider-aws target/release/dra-provider-gce /out/

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.source="https://github.com/dra-autoscaler/dra-autoscaler" \
      org.opencontainers.image.description="dra-autoscaler controller and provider binaries" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/dra-autoscaler /out/dra-provider-fake /out/dra-provider-aws /out/dra-provider-gce /usr/local/bin/
# distroless' nonroot user; the chart sets the same ids.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/dra-autoscaler"]
CMD ["run"]
