#!/usr/bin/env bash
# Resolves real Apache RocketMQ (name server, broker, tools and client) from Maven Central and builds
# the small Java driver in hack/rocketmq, into a cache folder outside the repository, so every clone
# reuses it. Prints that folder, which is what DETOUR_ROCKETMQ must point at. Skips the work when the
# folder for this pom and these driver sources is complete.
#
#   DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh) go test ./internal/testsupport/rmqtest/...
#
# Layout of the folder: <line>/server (class path of the name server and broker), <line>/client
# (class path of the client plus the driver jar), each with a file `version`; and 5/grpc, the class
# path of RocketMQ 5's gRPC SDK (rocketmq-client-java, a shaded jar kept apart from the remoting
# client's classes) plus its driver jar (src/grpc); and 5/proxy, the class path of RocketMQ 5's
# Proxy (rocketmq-proxy, with its own gRPC and Netty), also with a file `version`. Lines:
#   5: server 5.5.0, client 5.5.0 (the newest 5.x whose modules all resolve), gRPC SDK 5.2.0 (the
#      newest published), Proxy 5.5.0;
#   4: server 4.9.7, client 4.9.8 (4.9.8's client is published; its broker and name server are not).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/rocketmq"
server5=5.5.0 client5=5.5.0 grpc5=5.2.0 proxy5=5.5.0 server4=4.9.7 client4=4.9.8

need() { # need <command> <what to install>
  command -v "$1" >/dev/null 2>&1 && return
  echo "setup-rocketmq: '$1' not found; the real-RocketMQ tests need $2" >&2
  exit 1
}
need java "a Java runtime, 11 or newer (Debian: apt-get install openjdk-17-jdk-headless)"
need mvn "Maven 3 (Debian: apt-get install maven)"
need javac "a Java compiler, 11 or newer (Debian: apt-get install openjdk-17-jdk-headless)"

key=$( (cat "$src/pom.xml"; find "$src/src" -type f -name '*.java' | LC_ALL=C sort | xargs cat;
  echo "$server5 $client5 $grpc5 $proxy5 $server4 $client4") | sha256sum | cut -c1-16)
cache_root=${DETOUR_ROCKETMQ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detour/rocketmq}
dest="$cache_root/$key"

if [[ -f "$dest/complete" ]]; then
  echo "$dest"
  exit 0
fi

work="$cache_root/.build.$key.$$"
trap 'rm -rf "$work"' EXIT
rm -rf "$work" && mkdir -p "$work"
cp -r "$src/pom.xml" "$src/src" "$work/"

resolve() { # resolve <line> <side> <version>
  local out="$work/out/$1/$2"
  echo "setup-rocketmq: resolving RocketMQ $3 ($2 side) from Maven Central" >&2
  local goals=(dependency:copy-dependencies)
  [[ $2 == client ]] && goals=(package dependency:copy-dependencies)
  (cd "$work" && mvn -B -q -Dstyle.color=never -P"$2" -Drocketmq.version="$3" -DoutputDirectory="$out" \
    -Djar.finalName=detour-rocketmq-driver "${goals[@]}" >&2)
  if [[ $2 == client ]]; then
    cp "$work/target/detour-rocketmq-driver-0.0.0.jar" "$out/detour-rocketmq-driver.jar"
    rm -rf "$work/target"
  fi
  echo "$3" >"$out/version"
}
resolve 5 server "$server5"
resolve 5 client "$client5"
resolve 5 proxy "$proxy5"
resolve_grpc() { # resolve_grpc <version>: the gRPC SDK's class path and the driver built on it alone
  local out="$work/out/5/grpc" classes="$work/grpc-classes"
  echo "setup-rocketmq: resolving RocketMQ's gRPC SDK $1 from Maven Central" >&2
  (cd "$work" && mvn -B -q -Dstyle.color=never -Pgrpc -Drocketmq.version="$1" -DoutputDirectory="$out" \
    dependency:copy-dependencies >&2)
  mkdir -p "$classes"
  javac --release 11 -nowarn -cp "$out/*" -d "$classes" $(find "$work/src/grpc" -name '*.java' | LC_ALL=C sort) >&2
  jar cf "$out/detour-rocketmq-grpc-driver.jar" -C "$classes" .
  echo "$1" >"$out/version"
}
resolve_grpc "$grpc5"
resolve 4 server "$server4"
resolve 4 client "$client4"

touch "$work/out/complete"
rm -rf "$dest"
mv "$work/out" "$dest" # whole, so a concurrent or interrupted run never sees half a cache
echo "$dest"
