package hubcache

// This file holds the packed form in which the cache keeps the resources of a slice's app.

import (
	"encoding/binary"
	"strings"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// PackResources returns resources in the form the cache keeps them, at
// statusv1alpha1.AppStatus.PackedResources: one string that holds every distinct string
// of the resources once, in a table, then each resource as the table indexes of its
// group, version, kind, namespace, name, sync status, health status and health message.
// The resources repeat most of their strings (groups, kinds, namespaces, statuses), and
// as structs each took about 150 bytes of the cache: the slices of a bench run (8 apps
// of 20 resources each), decoded and transformed as the cache does, took 30.5 KB each
// with their resources as structs, and 12.4 KB with them packed. What it drops
// from the API's form: the images, which the cache drops anyway (stripSlice), and the
// difference between no health and an empty one, which no reader makes. Every value is
// an unsigned varint, each string its length then its bytes:
//
//	table length, each string of the table; resources, each resource's 8 indexes
func PackResources(resources []statusv1alpha1.ResourceStatus) string {
	if len(resources) == 0 {
		return ""
	}
	index := map[string]uint64{}
	var table []string
	rows := make([]byte, 0, len(resources)*packedFields+binary.MaxVarintLen64)
	rows = binary.AppendUvarint(rows, uint64(len(resources)))
	for _, r := range resources {
		var health statusv1alpha1.Health
		if r.Health != nil {
			health = *r.Health
		}
		for _, s := range [packedFields]string{r.Group, r.Version, r.Kind, r.Namespace, r.Name, r.Status, health.Status, health.Message} {
			i, ok := index[s]
			if !ok {
				i = uint64(len(table))
				index[s] = i
				table = append(table, s)
			}
			rows = binary.AppendUvarint(rows, i)
		}
	}
	// The exact size: the string's array is what the cache keeps, room to spare included.
	var varint [binary.MaxVarintLen64]byte
	uvarintLen := func(v uint64) int { return binary.PutUvarint(varint[:], v) }
	var b strings.Builder
	size := uvarintLen(uint64(len(table))) + len(rows)
	for _, s := range table {
		size += uvarintLen(uint64(len(s))) + len(s)
	}
	b.Grow(size)
	writeUvarint := func(v uint64) { b.Write(varint[:binary.PutUvarint(varint[:], v)]) }
	writeUvarint(uint64(len(table)))
	for _, s := range table {
		writeUvarint(uint64(len(s)))
		b.WriteString(s)
	}
	b.Write(rows)
	return b.String()
}

// packedFields is the number of strings of a resource in its packed form.
const packedFields = 8

// UnpackResources returns the resources of a PackResources string. Their strings are
// parts of packed, not copies. ok is false when packed is not such a string (no packer
// writes one): the resources are then those before the first it could not read.
func UnpackResources(packed string) (resources []argoapp.ResourceStatus, ok bool) {
	if packed == "" {
		return nil, true
	}
	rest := packed
	// binary.Uvarint, on the string in place (it takes a []byte, a copy).
	uvarint := func() (uint64, bool) {
		var v uint64
		for shift := uint(0); shift < 64; shift += 7 {
			if len(rest) == 0 {
				return 0, false
			}
			c := rest[0]
			rest = rest[1:]
			v |= uint64(c&0x7f) << shift
			if c < 0x80 {
				return v, true
			}
		}
		return 0, false
	}
	entries, ok := uvarint()
	if !ok || entries > uint64(len(rest)) {
		return nil, false
	}
	table := make([]string, 0, entries)
	for range entries {
		n, ok := uvarint()
		if !ok || n > uint64(len(rest)) {
			return nil, false
		}
		table = append(table, rest[:n])
		rest = rest[n:]
	}
	count, ok := uvarint()
	if !ok || count > uint64(len(rest)) {
		return nil, false
	}
	resources = make([]argoapp.ResourceStatus, 0, count)
	for range count {
		var fields [packedFields]string
		for i := range fields {
			at, ok := uvarint()
			if !ok || at >= uint64(len(table)) {
				return resources, false
			}
			fields[i] = table[at]
		}
		resources = append(resources, argoapp.ResourceStatus{
			Group: fields[0], Version: fields[1], Kind: fields[2], Namespace: fields[3], Name: fields[4], Status: fields[5],
			Health: argoapp.HealthStatus{Status: fields[6], Message: fields[7]},
		})
	}
	return resources, len(rest) == 0
}
