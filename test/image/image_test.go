// Package image tests the image that `make image` builds (hack/image): it reads the OCI
// layout tarball with nothing but the standard library, checks every blob against its
// digest, unpacks the layers of this machine's platform into a root filesystem, and runs
// /manager --help and /agent --help from it. A second build must give the same digest.
//
// The first run compiles the image's binaries (CGO_ENABLED=0, -trimpath) into the Go build
// cache, which takes minutes; later runs take seconds. The tests skip only when go or make
// is missing, or when this machine cannot run linux binaries.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

const (
	name = "argocd-pull-addon"
	repo = "registry.example.com/test/argocd-pull-addon"
	tag  = "0.0.0-test"
)

// The OCI image-spec structures the tests read.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

type config struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

var (
	buildOnce sync.Once
	built     string // the directory of the first build
	buildErr  error
	tmpRoot   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

// makeImage runs `make image` for this machine's platform into a new directory.
func makeImage(t *testing.T) (string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the image: skipped in -short mode")
	}
	if runtime.GOOS != "linux" {
		t.Skipf("the image's binaries are linux/%s; this machine runs %s", runtime.GOARCH, runtime.GOOS)
	}
	for _, tool := range []string{"go", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s to build the image: %v", tool, err)
		}
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	if tmpRoot == "" {
		if tmpRoot, err = os.MkdirTemp("", "image-test-"); err != nil {
			return "", err
		}
	}
	out, err := os.MkdirTemp(tmpRoot, "build-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "image", "IMAGE_DIR="+out,
		"IMAGE_PLATFORMS=linux/"+runtime.GOARCH, "IMAGE_REPO="+repo, "IMAGE_TAG="+tag)
	if log, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make image: %w\n%s", err, log)
	}
	return out, nil
}

// image returns the directory of the build that the tests share.
func image(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = makeImage(t) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if built == "" {
		t.Skip("the image was not built (see the first test)")
	}
	return built
}

// readTar returns the regular files of the tarball by name.
func readTar(t *testing.T, r io.Reader) (files map[string][]byte, headers map[string]*tar.Header) {
	t.Helper()
	files, headers = map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files, headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[hdr.Name] = hdr
		if hdr.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = data
		}
	}
}

// layoutImage reads the OCI layout tarball of dir, checks every blob against its digest,
// and returns the blobs by digest and the image of this machine's platform.
type layoutImage struct {
	blobs    map[string][]byte
	top      descriptor
	manifest manifest
	config   config
}

func readLayout(t *testing.T, dir string) layoutImage {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, name+".oci.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files, _ := readTar(t, f)
	if got := string(files["oci-layout"]); !strings.Contains(got, `"imageLayoutVersion":"1.0.0"`) &&
		!strings.Contains(got, `"imageLayoutVersion": "1.0.0"`) {
		t.Errorf("oci-layout = %q", got)
	}
	li := layoutImage{blobs: map[string][]byte{}}
	for path, data := range files {
		hexDigest, ok := strings.CutPrefix(path, "blobs/sha256/")
		if !ok {
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
			t.Errorf("blob %s holds content of digest %x", path, sum)
		}
		li.blobs["sha256:"+hexDigest] = data
	}
	blob := func(d descriptor, into any) {
		t.Helper()
		data, ok := li.blobs[d.Digest]
		if !ok {
			t.Fatalf("no blob %s (%s)", d.Digest, d.MediaType)
		}
		if int64(len(data)) != d.Size {
			t.Errorf("blob %s is %d bytes, its descriptor says %d", d.Digest, len(data), d.Size)
		}
		if into != nil {
			if err := json.Unmarshal(data, into); err != nil {
				t.Fatalf("blob %s: %v", d.Digest, err)
			}
		}
	}

	var top index
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json lists %+v, want one image index", top.Manifests)
	}
	li.top = top.Manifests[0]
	var idx index
	blob(li.top, &idx)
	var own *descriptor
	for i, m := range idx.Manifests {
		if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == runtime.GOARCH {
			own = &idx.Manifests[i]
		}
	}
	if own == nil {
		t.Fatalf("the image index has no linux/%s image: %+v", runtime.GOARCH, idx.Manifests)
	}
	blob(*own, &li.manifest)
	blob(li.manifest.Config, &li.config)
	for _, l := range li.manifest.Layers {
		blob(l, nil)
	}
	return li
}

func TestImageLayout(t *testing.T) {
	dir := image(t)
	li := readLayout(t, dir)
	digest, err := os.ReadFile(filepath.Join(dir, name+".digest"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(digest)); got != li.top.Digest {
		t.Errorf("%s.digest = %s, the layout's index is %s", name, got, li.top.Digest)
	}
	if got := li.top.Annotations["org.opencontainers.image.ref.name"]; got != tag {
		t.Errorf("ref.name annotation %q, want %q", got, tag)
	}
	if li.manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" ||
		li.manifest.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
		t.Errorf("manifest %s with config %s, want OCI media types", li.manifest.MediaType, li.manifest.Config.MediaType)
	}

	c := li.config
	if c.OS != "linux" || c.Architecture != runtime.GOARCH {
		t.Errorf("config platform %s/%s", c.OS, c.Architecture)
	}
	if c.Config.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532: a numeric non-root user that runAsNonRoot can verify", c.Config.User)
	}
	if !slices.Equal(c.Config.Entrypoint, []string{"/manager"}) || len(c.Config.Cmd) != 0 {
		t.Errorf("Entrypoint %q Cmd %q, want [/manager] and no Cmd", c.Config.Entrypoint, c.Config.Cmd)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	labels := c.Config.Labels
	if rev := labels["org.opencontainers.image.revision"]; strings.TrimSuffix(rev, "-dirty") != strings.TrimSpace(string(head)) {
		t.Errorf("revision label %q, want the commit %s", rev, head)
	}
	if labels["org.opencontainers.image.version"] != tag || !strings.HasPrefix(labels["org.opencontainers.image.source"], "https://") {
		t.Errorf("labels %v lack the version %s or the source", labels, tag)
	}

	// Each layer's uncompressed digest is its diff_id.
	if len(li.manifest.Layers) != len(c.RootFS.DiffIDs) {
		t.Fatalf("%d layers, %d diff_ids", len(li.manifest.Layers), len(c.RootFS.DiffIDs))
	}
	for i, l := range li.manifest.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(li.blobs[l.Digest]))
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, zr); err != nil {
			t.Fatal(err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != c.RootFS.DiffIDs[i] {
			t.Errorf("layer %d unpacks to %s, its diff_id is %s", i, got, c.RootFS.DiffIDs[i])
		}
	}
}

// unpack extracts the layers into a new root filesystem and returns it with the tar
// headers of its entries, by path.
func unpack(t *testing.T, li layoutImage) (string, map[string]*tar.Header) {
	t.Helper()
	rootfs := t.TempDir()
	all := map[string]*tar.Header{}
	for _, l := range li.manifest.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(li.blobs[l.Digest]))
		if err != nil {
			t.Fatal(err)
		}
		files, headers := readTar(t, zr)
		for p, hdr := range headers {
			if strings.Contains(p, "..") || strings.HasPrefix(p, "/") || strings.Contains(filepath.Base(p), ".wh.") {
				t.Fatalf("layer entry %q: the image needs no whiteouts and no paths outside its root", p)
			}
			all[strings.TrimSuffix(p, "/")] = hdr
			target := filepath.Join(rootfs, p)
			switch hdr.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(target, 0o755); err != nil {
					t.Fatal(err)
				}
			case tar.TypeReg:
				if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(target, files[p], os.FileMode(hdr.Mode).Perm()); err != nil {
					t.Fatal(err)
				}
			default:
				t.Errorf("layer entry %s has type %c; the image holds only directories and files", p, hdr.Typeflag)
			}
		}
	}
	return rootfs, all
}

func TestImageFilesystem(t *testing.T) {
	li := readLayout(t, image(t))
	rootfs, headers := unpack(t, li)

	// Exactly the files of a distroless static image, plus the two binaries: no shell, no
	// package manager, nothing else.
	var paths []string
	for p := range headers {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	want := []string{"agent", "etc", "etc/group", "etc/nsswitch.conf", "etc/passwd", "etc/ssl", "etc/ssl/certs",
		"etc/ssl/certs/ca-certificates.crt", "home", "home/nonroot", "manager", "root", "tmp"}
	if !slices.Equal(paths, want) {
		t.Errorf("the image holds %v, want %v", paths, want)
	}
	if mode := headers["tmp"].Mode; mode != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777", mode)
	}
	if h := headers["home/nonroot"]; h.Uid != 65532 || h.Gid != 65532 {
		t.Errorf("/home/nonroot owned by %d:%d, want 65532:65532", h.Uid, h.Gid)
	}
	for _, b := range []string{"manager", "agent"} {
		if h := headers[b]; h.Uid != 0 || h.Mode != 0o755 {
			t.Errorf("/%s owned by %d, mode %o: want root-owned 0755, not writable by the user it runs as", b, h.Uid, h.Mode)
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(rootfs, "etc", "passwd"))
	group, _ := os.ReadFile(filepath.Join(rootfs, "etc", "group"))
	if !strings.Contains(string(passwd), "\nnonroot:x:65532:65532:") || !strings.Contains(string(group), "\nnonroot:x:65532:") {
		t.Errorf("no nonroot 65532 in /etc/passwd or /etc/group:\n%s\n%s", passwd, group)
	}
	pem, _ := os.ReadFile(filepath.Join(rootfs, "etc", "ssl", "certs", "ca-certificates.crt"))
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) || len(pem) < 100_000 {
		t.Errorf("the CA bundle (%d bytes) does not parse as Mozilla's roots", len(pem))
	}
}

func TestBinariesRunFromTheImage(t *testing.T) {
	rootfs, _ := unpack(t, readLayout(t, image(t)))
	for _, tc := range []struct {
		binary string
		flags  []string
	}{
		{"manager", []string{"-agent-image", "-agent-image-pull-policy", "-agent-image-pull-secrets", "-addon-name", "-leader-elect"}},
		{"agent", []string{"-hub-kubeconfig", "-cluster-name", "-addon-namespace", "-watch-namespaces"}},
	} {
		t.Run(tc.binary, func(t *testing.T) {
			path := filepath.Join(rootfs, tc.binary)
			// Static: the image has no dynamic loader and no libc.
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("/%s needs a dynamic loader; the image has none", tc.binary)
				}
			}
			f.Close()

			// Run it with an empty environment from the image's root, as the runtime would
			// (less the chroot).
			cmd := exec.Command(path, "--help")
			cmd.Dir, cmd.Env = rootfs, []string{}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("/%s --help: %v\n%s", tc.binary, err, out)
			}
			for _, flag := range tc.flags {
				if !strings.Contains(string(out), "  "+flag+" ") && !strings.Contains(string(out), "  "+flag+"\n") {
					t.Errorf("/%s --help does not list %s:\n%s", tc.binary, flag, out)
				}
			}
		})
	}
}

// TestPushWithCrane pushes the layout as the README does, with bin/crane (`make crane`), to
// crane's own registry on loopback: the registry must serve the digest of the digest file.
func TestPushWithCrane(t *testing.T) {
	dir := image(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("make", "--no-print-directory", "-C", root, "crane").CombinedOutput(); err != nil {
		t.Fatalf("make crane: %v\n%s", err, out)
	}
	crane := filepath.Join(root, "bin", "crane")

	serve := exec.Command(crane, "registry", "serve", "--address", "127.0.0.1:0")
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	port := make(chan string, 1)
	go func() {
		buf := make([]byte, 4096)
		var log string
		for {
			n, err := stderr.Read(buf)
			log += string(buf[:n])
			if _, p, ok := strings.Cut(log, "serving on port "); ok && strings.Contains(p, "\n") {
				port <- strings.TrimSpace(strings.SplitN(p, "\n", 2)[0])
				_, _ = io.Copy(io.Discard, stderr)
				return
			}
			if err != nil {
				close(port)
				return
			}
		}
	}()
	var addr string
	select {
	case p, ok := <-port:
		if !ok {
			t.Fatal("crane registry serve exited before it served")
		}
		addr = "127.0.0.1:" + p
	case <-time.After(30 * time.Second):
		t.Fatal("crane registry serve did not start in 30s")
	}

	want, err := os.ReadFile(filepath.Join(dir, name+".digest"))
	if err != nil {
		t.Fatal(err)
	}
	ref := addr + "/gitops/argocd-pull-addon:" + tag
	out, err := exec.Command(crane, "push", filepath.Join(dir, name+".oci"), ref).Output()
	if err != nil {
		t.Fatalf("crane push: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != addr+"/gitops/argocd-pull-addon@"+strings.TrimSpace(string(want)) {
		t.Errorf("crane push printed %s, want the digest %s", got, want)
	}
	out, err = exec.Command(crane, "digest", ref).Output()
	if err != nil {
		t.Fatalf("crane digest: %v", err)
	}
	if string(out) != string(want) {
		t.Errorf("the registry serves %s as %s, want %s", ref, out, want)
	}
	out, err = exec.Command(crane, "config", "--platform", "linux/"+runtime.GOARCH, ref).Output()
	if err != nil || !strings.Contains(string(out), `"User":"65532:65532"`) {
		t.Errorf("crane config of the pushed image: %v\n%s", err, out)
	}
}

// TestReproducible builds the image again: the same commit gives the same bytes.
func TestReproducible(t *testing.T) {
	first := image(t)
	second, err := makeImage(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{name + ".digest", name + ".oci.tar"} {
		a, err := os.ReadFile(filepath.Join(first, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(second, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("two builds of one commit differ in %s (%x, %x)", f, sha256.Sum256(a), sha256.Sum256(b))
		}
	}
}
