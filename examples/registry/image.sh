#!/bin/sh
# Builds the registry example's image from this machine's busybox and perl, pulling
# nothing, on the engine at $DOCKER_HOST (default: the engine's socket):
#
#   examples/registry/image.sh
#   go run ./cmd/clusterflow dev --backend docker -f examples/registry/docker.yaml
#
# It needs busybox (Debian: busybox-static), perl and the docker CLI.
set -eu
tag=${1:-clusterflow-example/registry:1}
busybox=$(command -v busybox) || { echo "image.sh needs busybox (Debian: apt-get install busybox-static)" >&2; exit 1; }
perl=$(command -v perl) || { echo "image.sh needs perl" >&2; exit 1; }
command -v docker > /dev/null || { echo "image.sh needs the docker CLI (Debian: docker.io)" >&2; exit 1; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/usr/bin" "$root/etc" "$root/tmp"
chmod 1777 "$root/tmp"
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
echo 'root:x:0:' > "$root/etc/group"
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
cp "$perl" "$root/usr/bin/perl"
programs="$perl $busybox"
# The commands the scripts use that this busybox lacks (Debian's has no nohup), the host's.
for command in nohup; do
  if [ ! -e "$root/bin/$command" ]; then
    here=$(command -v "$command") || { echo "image.sh needs $command" >&2; exit 1; }
    cp "$here" "$root/usr/bin/$command"
    programs="$programs $here"
  fi
done
# The programs' shared libraries (none for a static busybox), at the same paths.
for lib in $(for program in $programs; do ldd "$program" 2> /dev/null || true; done | grep -o '/[^ ]*' | sort -u); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
# The folders of perl's modules that the registry loads (IO::Socket::INET and what it
# uses, with their compiled parts): Debian's perl-base.
for dir in $("$perl" -MIO::Socket::INET -e 'my %d; for my $f (values %INC) { for (@INC) { $d{$_} = 1 if index($f, "$_/") == 0 } } print "$_\n" for sort keys %d'); do
  mkdir -p "$root$dir"
  cp -a "$dir/." "$root$dir/"
done
# The C.UTF-8 locale, which scripts may be run under: perl warns on stderr without it.
if [ -d /usr/lib/locale/C.utf8 ]; then
  mkdir -p "$root/usr/lib/locale"
  cp -a /usr/lib/locale/C.utf8 "$root/usr/lib/locale/"
fi
tar -C "$root" -c . | docker import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' - "$tag" > /dev/null
echo "built $tag"
