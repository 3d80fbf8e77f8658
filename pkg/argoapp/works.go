package argoapp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// This file names the ManifestWork of a hub Application, and maps a work back to its
// Application through the annotations above.

const (
	// MaxManifestWorkNameLength is the longest name ManifestWorkName returns. The work
	// agent names the AppliedManifestWork on the managed cluster "<64 hex characters of
	// the hub hash>-<work name>", and that name must itself be a DNS-1123 subdomain of at
	// most 253 characters: 253 - 65 = 188.
	MaxManifestWorkNameLength = validation.DNS1123SubdomainMaxLength - 65

	// uidPrefixLength is how many leading characters of the hub Application's UID end
	// the work name.
	uidPrefixLength = 5

	// nameHashLength is how many hex characters of the SHA-256 of the app name a
	// shortened work name carries.
	nameHashLength = 8
)

// ManifestWorkName returns the name of the ManifestWork of a hub Application:
// "<app name>-<first 5 characters of uid>", the name existing pull systems use. The UID
// part keeps the name distinct when an app of the same name is re-created. uid must be
// set.
//
// A name longer than MaxManifestWorkNameLength is shortened deterministically to
// "<app name prefix>-<8 hex of the SHA-256 of the full app name>-<uid part>": the hash
// keeps long names that share a prefix apart, and the prefix keeps the name readable.
// Trailing '-' and '.' are cut from the prefix, so that a valid app name gives a valid
// DNS-1123 subdomain.
func ManifestWorkName(appName string, uid types.UID) string {
	uidPart := string(uid)
	if len(uidPart) > uidPrefixLength {
		uidPart = uidPart[:uidPrefixLength]
	}
	name := appName + "-" + uidPart
	if len(name) <= MaxManifestWorkNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(appName))
	suffix := hex.EncodeToString(sum[:])[:nameHashLength] + "-" + uidPart
	prefix := strings.TrimRight(appName[:MaxManifestWorkNameLength-len(suffix)-1], "-.")
	if prefix == "" {
		return suffix
	}
	return prefix + "-" + suffix
}

// ApplicationOfWork returns the hub Application a ManifestWork was rendered from: the
// one its back-pointer annotations name, when it carries the pull label.
func ApplicationOfWork(work metav1.Object) (types.NamespacedName, bool) {
	if _, ok := work.GetLabels()[LabelPullToOCMManagedCluster]; !ok {
		return types.NamespacedName{}, false
	}
	key := types.NamespacedName{
		Namespace: work.GetAnnotations()[AnnotationHubApplicationNamespace],
		Name:      work.GetAnnotations()[AnnotationHubApplicationName],
	}
	return key, key.Namespace != "" && key.Name != ""
}
