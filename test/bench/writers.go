package main

// This file tells the hub's writes of P1 apart by writer, and sets the stand-ins' beside
// what the real writers wrote on the local fleet.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
)

// The writers of the hub during P1.
const (
	writerManager   = "manager"
	writerWorkAgent = "work agent"
	writerAgents    = "agents"
	// writerBench is the bench's creates of the Applications: the first writes of the
	// ApplicationSet controller, which the bench plays no further.
	writerBench = "bench"
)

// writers are the writers in the order the results list them.
var writers = []string{writerWorkAgent, writerManager, writerAgents, writerBench}

// fleetCase is what each writer wrote per app, by verb, on the local fleet with every
// writer real: one ApplicationSet of 20 pulled guestbook apps (10 on each of 2 clusters),
// from its creation until every app was Synced and Healthy on the hub and in the report,
// counted from the hub's audit log by the e2e spec of a rollout's cost. Each figure is
// the median of three runs of the spec alone on the machine (2026-12-08, commit 34376cf,
// a rollout's passing states held for 15 s); the runs ranged 10.7 to 11.5 for the work
// agent's status patches (of which, in a run of 2026-12-07, 3.25 refused with a
// conflict), 1.0 in each for the manager's patches of the Applications, 1.0 to 1.1 for
// the slices and 0.55 to 0.65 for the agents' reports. The ApplicationSet controller's
// writes past the creates (PUT applicationsets/status 0.65 to 0.8 and 1.0 to 1.05 Events
// per app) have no stand-in. The report is the ApplicationSet's: the bench's shape has
// one ApplicationSet per 2 (-scale fleet) or 1,000 apps, so its writes per app are not
// the fleet's, and it is left out.
var fleetCase = map[string]sim.Requests{
	writerWorkAgent: {"PATCH manifestworks/status": 11.0, "PATCH manifestworks": 1.0},
	writerManager:   {"PATCH applications": 1.0, "APPLY manifestworks": 1.0},
	writerAgents:    {"APPLY applicationstatusslices": 1.0, "APPLY managedclusteraddons/status": 0.6},
	writerBench:     {"POST applications": 1.0},
}

// fleetCaseAppsPerCluster is the apps per cluster of fleetCase: how many a cluster's
// agent reports together, which its writes per app depend on.
const fleetCaseAppsPerCluster = 10

// writesPerApp lists the writes per app in all and of each writer, by verb; the leader's
// lease renewals are left out.
func writesPerApp(byWriter map[string]sim.Requests, apps float64) string {
	var total float64
	var parts []string
	for _, w := range writers {
		requests := byWriter[w].Without(isLease)
		total += requests.Total()
		parts = append(parts, fmt.Sprintf("%s %.2f (%s)", w, requests.Total()/apps, perApp(requests, apps)))
	}
	return fmt.Sprintf("%.2f: %s", total/apps, strings.Join(parts, "; "))
}

// besideTheFleet sets each writer's writes per app by verb beside fleetCase's, as a
// ratio, and marks those more than 20 % away; only at fleetCase's apps per cluster
// (Scale.ApplicationSets).
func besideTheFleet(byWriter map[string]sim.Requests, apps float64, appsPerCluster int) string {
	if appsPerCluster != fleetCaseAppsPerCluster {
		return fmt.Sprintf("not at this scale: %d apps per cluster, not the fleet's %d", appsPerCluster, fleetCaseAppsPerCluster)
	}
	var parts []string
	for _, w := range writers {
		fleet := fleetCase[w]
		for _, key := range slices.Sorted(maps.Keys(fleet)) {
			ratio := byWriter[w][key] / apps / fleet[key]
			mark := ""
			if math.Abs(ratio-1) > 0.2 {
				mark = " ✗"
			}
			parts = append(parts, fmt.Sprintf("%s %s %.2f / %.2f = %.2f%s", w, key, byWriter[w][key]/apps, fleet[key], ratio, mark))
		}
	}
	return strings.Join(parts, ", ")
}
