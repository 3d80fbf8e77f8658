//go:build tools

// crane, pinned with the library that builds the image: `make crane` builds it into bin/
// to push the image (`bin/crane push bin/image/argocd-pull-addon.oci <repo>:<tag>`).
package main

import _ "github.com/google/go-containerregistry/cmd/crane"
