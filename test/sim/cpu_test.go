package sim

import "testing"

func TestParseStat(t *testing.T) {
	line := "4242 (kube apiserver) S 17 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 12 0 100 0 0"
	pid, name, ppid, seconds, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if pid != 4242 || name != "kube apiserver" || ppid != 17 || seconds != 18.01 {
		t.Errorf("parseStat = %d %q %d %v, want 4242 \"kube apiserver\" 17 18.01", pid, name, ppid, seconds)
	}
	if _, _, _, _, err := parseStat("4242 kube-apiserver S"); err == nil {
		t.Error("parseStat accepted a line without a name in parentheses")
	}
}

func TestParseRequestCounts(t *testing.T) {
	exposition := []byte(`# HELP apiserver_request_total Counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="work.open-cluster-management.io",resource="manifestworks",scope="resource",subresource="",verb="APPLY",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="argoproj.io",resource="applications",scope="resource",subresource="",verb="GET",version="v1alpha1"} 99
apiserver_request_total{code="409",component="apiserver",dry_run="",group="work.open-cluster-management.io",resource="manifestworks",scope="resource",subresource="status",verb="PUT",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="work.open-cluster-management.io",resource="manifestworks",scope="resource",subresource="status",verb="PUT",version="v1"} 5
`)
	after, err := ParseRequestCounts(exposition)
	if err != nil {
		t.Fatal(err)
	}
	before := Requests{"PUT leases": 1}
	writes := after.WritesSince(before)
	want := Requests{"APPLY manifestworks": 7, "PUT leases": 2, "PUT manifestworks/status": 7}
	if len(writes) != len(want) {
		t.Fatalf("writes = %v, want %v", writes, want)
	}
	for k, v := range want {
		if writes[k] != v {
			t.Errorf("writes[%q] = %v, want %v", k, writes[k], v)
		}
	}
	if got := writes.Without(func(k string) bool { return k == "PUT leases" }).Total(); got != 14 {
		t.Errorf("total without leases = %v, want 14", got)
	}
}

func TestParseConsistencyChecks(t *testing.T) {
	exposition := []byte(`# TYPE apiserver_storage_consistency_checks_total counter
apiserver_storage_consistency_checks_total{group="argoproj.io",resource="applications",status="success"} 2
apiserver_storage_consistency_checks_total{group="argoproj.io",resource="applications",status="error"} 1
apiserver_storage_consistency_checks_total{group="",resource="pods",status="success"} 3
apiserver_request_total{code="200",resource="pods",verb="GET"} 99
`)
	checks, err := ParseConsistencyChecks(exposition)
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 2 || checks["applications"] != 3 || checks["pods"] != 3 {
		t.Errorf("checks = %v, want applications 3, pods 3", checks)
	}
}
