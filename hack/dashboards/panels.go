package main

// board is one dashboard: its file under config/grafana, its variables and its rows of panels.
type board struct {
	file, uid, title, description string
	variables                     []variable
	rows                          []row
}

// variable is a dashboard variable filled from a label's values (Grafana's label_values).
type variable struct{ name, label, query string }

// row is a titled group of panels.
type row struct {
	title  string
	panels []panel
}

// panelKind is how a panel shows its queries.
type panelKind int

const (
	kindTimeSeries panelKind = iota
	kindStat
	kindTable
)

// panel is one panel: its description is what it answers for the person on call, and is also
// what docs/tasks/monitoring.md says of it.
type panel struct {
	kind               panelKind
	title, description string
	unit               string
	width              uint32
	queries            []query
}

// query is one PromQL query of a panel and the legend of its series.
type query struct{ expr, legend string }

// ns selects the namespaces chosen at the top of the dashboard; Prometheus adds the namespace of
// the scraped pod to every series (a ServiceMonitor's target labels).
const ns = `namespace=~"$namespace"`

// rate is the rate window of every panel: Grafana's own, at least four scrapes wide.
const rate = `[$__rate_interval]`

// namespaceVariable picks the namespaces the manager runs in; detour_leader is served by every
// replica, leader or not.
var namespaceVariable = variable{"namespace", "Namespace", `label_values(detour_leader, namespace)`}

// boards are the dashboards detour ships.
func boards() []board {
	return []board{overview(), brokerBoard()}
}

// overview is the dashboard the person on call opens first.
func overview() board {
	return board{
		file: "detour-overview.json", uid: "detour-overview", title: "detour / Overview",
		description: "Sends through detour's doors, brokers it holds out and why, broker pressure, " +
			"fault handling, undeclared topics and the replicas.",
		variables: []variable{namespaceVariable},
		rows:      []row{doorsRow(), brokersRow(), pressureRow(), faultRow(), undeclaredRow(), fleetRow()},
	}
}
