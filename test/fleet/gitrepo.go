package fleet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// GuestbookPath is the folder of the guestbook app inside the fleet's git repository.
const GuestbookPath = "guestbook"

// GuestbookDeployment is the guestbook's Deployment as committed first. Its Pod is
// scheduled onto a KWOK Node and becomes Ready within seconds, so Argo CD reports it
// Progressing, then Healthy.
const GuestbookDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: guestbook-ui
spec:
  replicas: 1
  revisionHistoryLimit: 3
  selector:
    matchLabels: {app: guestbook-ui}
  template:
    metadata:
      labels: {app: guestbook-ui}
    spec:
      containers:
      - name: guestbook-ui
        image: gcr.io/heptio-images/ks-guestbook-demo:0.2
        ports:
        - containerPort: 80
`

// guestbookFiles is a small guestbook-like app: a Deployment and a Service.
var guestbookFiles = map[string]string{
	"guestbook/deployment.yaml": GuestbookDeployment,
	"guestbook/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: guestbook-ui
spec:
  ports:
  - port: 80
    targetPort: 80
  selector:
    app: guestbook-ui
`,
}

// GitRepo is a local git repository that Argo CD reads through a file:// URL.
type GitRepo struct {
	Dir string
}

// URL is the repository URL to put in an Application's source.
func (r *GitRepo) URL() string { return "file://" + r.Dir }

// newGitRepo creates the repository on branch main with the guestbook app committed.
func newGitRepo(dir string) (*GitRepo, error) {
	r := &GitRepo{Dir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := r.git("init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	if _, err := r.Commit("guestbook app", guestbookFiles); err != nil {
		return nil, err
	}
	return r, nil
}

// Commit writes the files (paths relative to the repository) and commits them to main. It
// returns the new revision.
func (r *GitRepo) Commit(message string, files map[string]string) (string, error) {
	for name, content := range files {
		path := filepath.Join(r.Dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := r.git("add", "-A"); err != nil {
		return "", err
	}
	if err := r.git("-c", "user.name=fleet", "-c", "user.email=fleet@localhost", "commit", "-q", "-m", message); err != nil {
		return "", err
	}
	return r.Head()
}

// Head returns the revision of main.
func (r *GitRepo) Head() (string, error) {
	out, err := exec.Command("git", "-C", r.Dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse in %s: %w", r.Dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (r *GitRepo) git(args ...string) error {
	out, err := exec.Command("git", append([]string{"-C", r.Dir}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
