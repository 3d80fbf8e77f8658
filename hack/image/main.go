// Command image builds the argocd-pull-addon container image without a container engine
// or a base image to pull: `make image` runs it.
//
// The image is distroless-equivalent, built from scratch: a base layer with /etc/passwd and
// /etc/group (root, nobody and nonroot 65532), /etc/nsswitch.conf, /tmp (1777),
// /home/nonroot and the Mozilla root CAs in /etc/ssl/certs/ca-certificates.crt, and an
// application layer with the static binaries /manager and /agent. No shell, no package
// manager. It runs as 65532:65532 with the entrypoint /manager.
//
// The CA bundle comes from the pinned Go module golang.org/x/crypto/x509roots/fallback
// (Mozilla's NSS roots), not from the build machine, so that every machine builds the same
// bytes. Roots that NSS trusts only with a distrust-after date are left out: a PEM bundle
// cannot carry that constraint.
//
// The build is reproducible: every file time and the config's creation time are
// SOURCE_DATE_EPOCH (the Makefile passes the commit time), the binaries are built with
// -trimpath, the tar entries are sorted with fixed owners, and gzip adds no name or time.
// Two builds of one commit with one Go toolchain give the same digest.
//
// Output, in -out:
//
//	<name>.oci/        an OCI image layout: `crane push <name>.oci <repo>:<tag>` pushes it
//	<name>.oci.tar     the same layout as one tarball (skopeo's and podman's oci-archive:)
//	<name>.digest      the digest of the image index, e.g. sha256:3f2a...
package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The nonroot user of distroless: the image's user, and the owner of its home.
const (
	nonrootID = 65532
	caBundle  = "etc/ssl/certs/ca-certificates.crt"
)

// binaries are the commands the image holds, each at /<name>.
var binaries = []string{"manager", "agent"}

type options struct {
	src        string // the repository root, where ./cmd/manager and ./cmd/agent are
	out        string
	name       string
	platforms  string
	repository string
	tag        string
	source     string
	revision   string
	epoch      time.Time
}

func main() {
	var o options
	flag.StringVar(&o.src, "src", "../..", "the repository root")
	flag.StringVar(&o.out, "out", "../../bin/image", "directory of the OCI layout, its tarball and the digest file")
	flag.StringVar(&o.name, "name", "argocd-pull-addon", "file name of the outputs")
	flag.StringVar(&o.platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch of the image index")
	flag.StringVar(&o.repository, "repository", "quay.io/ocm-gitops/argocd-pull-addon", "repository the image is meant for (an annotation; pushing names the real one)")
	flag.StringVar(&o.tag, "tag", "", "tag and version of the image (label org.opencontainers.image.version)")
	flag.StringVar(&o.source, "source", "https://github.com/ocm-gitops/argocd-pull-addon", "label org.opencontainers.image.source")
	flag.StringVar(&o.revision, "revision", "", "the commit built (label org.opencontainers.image.revision)")
	flag.Parse()
	epoch, err := sourceDateEpoch()
	if err == nil && (o.tag == "" || o.revision == "") {
		err = fmt.Errorf("-tag and -revision are required")
	}
	if err == nil {
		o.epoch = epoch
		err = build(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH (https://reproducible-builds.org), else 1970.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func build(o options) error {
	base, err := baseLayer(o.epoch)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "argocd-pull-addon-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, platform := range strings.Split(o.platforms, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(platform), "/")
		if !ok || goos != "linux" {
			return fmt.Errorf("platform %q: want linux/<arch>", platform)
		}
		img, err := platformImage(o, base, filepath.Join(tmp, goarch), goarch)
		if err != nil {
			return fmt.Errorf("image for %s: %w", platform, err)
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}}})
	}
	index = mutate.Annotations(index, o.labels()).(v1.ImageIndex)
	digest, err := index.Digest()
	if err != nil {
		return err
	}

	dir := filepath.Join(o.out, o.name+".oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := path.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.tag,
		"io.containerd.image.name":          o.repository + ":" + o.tag,
	})); err != nil {
		return fmt.Errorf("write the OCI layout: %w", err)
	}
	if err := tarDir(dir, filepath.Join(o.out, o.name+".oci.tar"), o.epoch); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, o.name+".digest"), []byte(digest.String()+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s:%s %s\n  %s\n  %s.tar\n", o.repository, o.tag, digest, dir, dir)
	return nil
}

// labels are the OCI annotations of the index and the labels of each image's config.
func (o options) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.version":     o.tag,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.created":     o.epoch.Format(time.RFC3339),
		"org.opencontainers.image.title":       "argocd-pull-addon",
		"org.opencontainers.image.description": "OCM addon that gives Argo CD a pull model: /manager (hub) and /agent (managed clusters)",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// platformImage builds the binaries for goarch into dir and returns the image: the base
// layer, the binaries' layer and the config.
func platformImage(o options, base v1.Layer, dir, goarch string) (v1.Image, error) {
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", dir + string(filepath.Separator)}
	for _, b := range binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = o.src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	var entries []entry
	for _, b := range binaries {
		data, err := os.ReadFile(filepath.Join(dir, b))
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{name: b, mode: 0o755, data: data})
	}
	app, err := layer(entries, o.epoch)
	if err != nil {
		return nil, err
	}

	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: o.epoch}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: created,
			CreatedBy: "hack/image: passwd, group, nsswitch.conf, /tmp, /home/nonroot, CA certificates", Comment: "distroless-equivalent base"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{Created: created,
			CreatedBy: "hack/image: CGO_ENABLED=0 go build -trimpath ./cmd/manager ./cmd/agent"}},
	)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", goarch, created
	cfg.Author = ""
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonrootID, nonrootID),
		Entrypoint: []string{"/manager"},
		WorkingDir: "/home/nonroot",
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=/" + caBundle,
		},
		Labels: o.labels(),
	}
	return mutate.ConfigFile(img, cfg)
}

// entry is a file or directory of a layer; a directory has no data and a name ending "/".
type entry struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte
}

// baseLayer holds what distroless's static:nonroot holds that a static Go binary can use.
func baseLayer(epoch time.Time) (v1.Layer, error) {
	var pemCerts bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue // distrusted after a date: a PEM bundle cannot say so
		}
		if err := pem.Encode(&pemCerts, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n < 100 {
		return nil, fmt.Errorf("the CA bundle holds %d roots; want Mozilla's (more than 100)", n)
	}
	return layer([]entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: caBundle, mode: 0o644, data: pemCerts.Bytes()},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: nonrootID, gid: nonrootID},
		{name: "root/", mode: 0o700},
		{name: "tmp/", mode: 0o1777},
	}, epoch)
}

// layer writes entries (sorted by name) as an uncompressed tar and returns it as a gzip OCI
// layer.
func layer(entries []entry, epoch time.Time) (v1.Layer, error) {
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: epoch, Format: tar.FormatPAX}
		if strings.HasSuffix(e.name, "/") {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// tarDir writes the directory dir as the tarball file, its entries sorted, owned by root
// and dated epoch.
func tarDir(dir, file string, epoch time.Time) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	return tw.Close()
}
