// Package scenarios reads rehearsal scenario files, validates them before
// anything runs, and runs them against a real ledger, a real SMTP test
// mailbox and fake source systems on a fake clock.
//
// A scenario is one YAML file: a world (customers, tasks, actors, the
// business actions the workflows may take), a list of steps and the final
// expectations. See docs/scenarios.md for the format reference.
package scenarios

import "fmt"

// Scenario is one parsed and validated scenario file.
type Scenario struct {
	Name        string `yaml:"name"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
	World       World  `yaml:"world"`
	Steps       []Step `yaml:"steps"`
	Expect      Final  `yaml:"expect"`

	// File is where the scenario was read from ("builtin/NAME.yaml" for
	// built-ins); every Problem names it.
	File string `yaml:"-"`
	Pos  Pos    `yaml:"-"`
}

// World is the fictional setting a scenario starts from.
type World struct {
	Customers []Customer  `yaml:"customers"`
	Tasks     []Task      `yaml:"tasks"`
	Actors    []Actor     `yaml:"actors"`
	Actions   []ActionDef `yaml:"actions"`
	// Payments sets the payments fake's options at the start; steps
	// change them later (payments_set).
	Payments *PaymentsWorld `yaml:"payments"`
	Pos      Pos            `yaml:"-"`
}

// PaymentsWorld is the payments fake's starting options (docs/payments.md):
// keys mode, key window and search lag on the rehearsal clock, and whether
// an injected 500 is stored under the key ("yes"/"no").
type PaymentsWorld struct {
	Keys      string         `yaml:"keys"`
	Window    string         `yaml:"window"`
	SearchLag string         `yaml:"search_lag"`
	Store5xx  string         `yaml:"store_5xx"`
	Pos       Pos            `yaml:"-"`
	KeyPos    map[string]Pos `yaml:"-"`
}

// RefundDef is the body of a refund the action writes to the payments
// fake (POST /v1/refunds). Amount is in minor units.
type RefundDef struct {
	Payment  string         `yaml:"payment"`
	Amount   int            `yaml:"amount"`
	Currency string         `yaml:"currency"`
	Reason   string         `yaml:"reason"`
	Pos      Pos            `yaml:"-"`
	KeyPos   map[string]Pos `yaml:"-"`
}

// Customer is a CRM record. Fields holds material fields such as consent
// and order_state.
type Customer struct {
	ID     string            `yaml:"id"`
	Email  string            `yaml:"email"`
	Fields map[string]string `yaml:"fields"`
	Pos    Pos               `yaml:"-"`
	KeyPos map[string]Pos    `yaml:"-"`
}

// Task is a helpdesk enquiry. Owner, when set, must be an actor.
type Task struct {
	ID       string         `yaml:"id"`
	Customer string         `yaml:"customer"`
	Subject  string         `yaml:"subject"`
	Status   string         `yaml:"status"`
	Owner    string         `yaml:"owner"`
	Pos      Pos            `yaml:"-"`
	KeyPos   map[string]Pos `yaml:"-"`
}

// Actor kinds.
const (
	KindStaff    = "staff"
	KindWorkflow = "workflow"
	KindAgent    = "agent"
)

// Actor is a staff member, a workflow or an agent.
type Actor struct {
	ID     string         `yaml:"id"`
	Kind   string         `yaml:"kind"`
	Pos    Pos            `yaml:"-"`
	KeyPos map[string]Pos `yaml:"-"`
}

// ActionDef is a business action a workflow or person may propose. Its key
// is built from the task's customer, Event, Type and Target.
type ActionDef struct {
	Name     string   `yaml:"name"`
	Task     string   `yaml:"task"`
	Event    string   `yaml:"event"`
	Type     string   `yaml:"type"`
	Target   string   `yaml:"target"` // default: the task id
	To       string   `yaml:"to"`     // default: the customer's email in the CRM
	Subject  string   `yaml:"subject"`
	Body     string   `yaml:"body"`
	Material []string `yaml:"material"` // source.field, re-read before each send
	// Refund makes the action an HTTP request to the payments fake
	// instead of an e-mail; Profile is the duplicate control its
	// destination declares (a name in Profiles, or a dup=… query).
	Refund  *RefundDef     `yaml:"refund"`
	Profile string         `yaml:"profile"`
	Pos     Pos            `yaml:"-"`
	KeyPos  map[string]Pos `yaml:"-"`
}

// Step is one thing that happens. Do names the verb; the other fields are
// its arguments (which ones apply depends on the verb). A step with Parallel
// runs those steps concurrently instead.
type Step struct {
	Do       string `yaml:"do"`
	Actor    string `yaml:"actor"`
	Task     string `yaml:"task"`
	Action   string `yaml:"action"`
	As       string `yaml:"as"`
	Reason   string `yaml:"reason"`
	Subject  string `yaml:"subject"`
	Body     string `yaml:"body"`
	To       string `yaml:"to"`
	Customer string `yaml:"customer"`
	Field    string `yaml:"field"`
	Value    string `yaml:"value"`
	Source   string `yaml:"source"`
	Fault    string `yaml:"fault"`
	Count    int    `yaml:"count"`
	Delay    string `yaml:"delay"`
	Point    string `yaml:"at"`
	For      string `yaml:"for"`
	Event    string `yaml:"event"`
	Approver string `yaml:"approver"`
	Kind     string `yaml:"kind"`
	Release  string `yaml:"release"` // an audience release id
	CSV      string `yaml:"csv"`     // an audience file, inline
	Note     string `yaml:"note"`
	Amount   int    `yaml:"amount"` // revise: a refund's new amount

	// The keys of run_workflow, start_workflow and await_workflow: a
	// team's own command, run against the rehearsal (see workflow.go).
	Command        []string          `yaml:"command"`     // argv; no shell
	Shell          string            `yaml:"shell"`       // a command line for /bin/sh -c, only when asked
	Dir            string            `yaml:"dir"`         // working directory, relative to the scenario file
	Timeout        string            `yaml:"timeout"`     // default 30s; then the process group is killed
	Stdin          string            `yaml:"stdin"`       // literal standard input
	Env            map[string]string `yaml:"env"`         // extra variables
	InheritEnv     []string          `yaml:"inherit_env"` // variables taken from the caller's environment
	Copies         int               `yaml:"copies"`      // run this many at once (default 1)
	Run            string            `yaml:"run"`         // names a background run for await_workflow
	KillAt         string            `yaml:"kill_at"`     // a moment: mailbox_accepted
	KillAfter      string            `yaml:"kill_after"`  // a duration of real time
	ExpectExit     string            `yaml:"expect_exit"` // an exit code, killed or timeout
	ExpectExits    []string          `yaml:"expect_exits"`
	OutputContains string            `yaml:"output_contains"`
	State          string            `yaml:"state"` // await_state: the state to wait for

	Expect         string `yaml:"expect"`
	ReasonContains string `yaml:"reason_contains"`

	Parallel []Step `yaml:"parallel"`
	// ExpectAll lists the outcome classes a parallel block must produce,
	// in any order (goroutines race; which one wins is not reported).
	ExpectAll []string `yaml:"expect_all"`

	Pos    Pos            `yaml:"-"`
	KeyPos map[string]Pos `yaml:"-"`
}

// Final holds the expectations checked after the last step.
type Final struct {
	Arrivals *ArrivalExpect    `yaml:"arrivals"`
	Records  *RecordExpect     `yaml:"records"`
	States   map[string]string `yaml:"states"`
	Counts   *CountExpect      `yaml:"counts"`
	History  []string          `yaml:"history"`
	Audience []AudienceExpect  `yaml:"audience"`
	Pos      Pos               `yaml:"-"`
	KeyPos   map[string]Pos    `yaml:"-"`
}

// AudienceExpect asserts one audience release's counts: the reconciliation
// of its file, how far sending got, and what the mailbox received for its
// eligible recipients.
type AudienceExpect struct {
	Release    string         `yaml:"release"`
	SourceRows *int           `yaml:"source_rows"`
	ErrorRows  *int           `yaml:"error_rows"`
	Unmatched  *int           `yaml:"unmatched"`
	Duplicates *int           `yaml:"duplicates"`
	Resolved   *int           `yaml:"resolved"`
	Excluded   *int           `yaml:"excluded"`
	Removed    *int           `yaml:"removed"`
	Eligible   *int           `yaml:"eligible"`
	Attempted  *int           `yaml:"attempted"`
	Confirmed  *int           `yaml:"confirmed"`
	Arrived    *int           `yaml:"arrived"`
	Pos        Pos            `yaml:"-"`
	KeyPos     map[string]Pos `yaml:"-"`
}

// ArrivalExpect asserts what the mailbox received, as counted by the SMTP
// server itself.
type ArrivalExpect struct {
	Total        *int           `yaml:"total"`
	PerRecipient map[string]int `yaml:"per_recipient"`
	PerAction    map[string]int `yaml:"per_action"`
	Pos          Pos            `yaml:"-"`
	KeyPos       map[string]Pos `yaml:"-"`
}

// RecordExpect asserts what the payments fake holds, as counted by the
// fake itself: refunds in all and per action (by the action key each
// carries in metadata.gatehouse_key).
type RecordExpect struct {
	Total     *int           `yaml:"total"`
	PerAction map[string]int `yaml:"per_action"`
	Pos       Pos            `yaml:"-"`
	KeyPos    map[string]Pos `yaml:"-"`
}

// CountExpect asserts the ledger's counts, each kept apart.
type CountExpect struct {
	Intended        *int           `yaml:"intended"`
	Attempts        *int           `yaml:"attempts"`
	Confirmed       *int           `yaml:"confirmed"`
	Arrived         *int           `yaml:"arrived"`
	Denials         *int           `yaml:"denials"`
	DuplicateBlocks *int           `yaml:"duplicate_blocks"`
	Holds           *int           `yaml:"holds"`
	Conflicts       *int           `yaml:"conflicts"`
	Unknown         *int           `yaml:"unknown"`
	Pos             Pos            `yaml:"-"`
	KeyPos          map[string]Pos `yaml:"-"`
}

// Pos is a line and column in a scenario file (1-based).
type Pos struct {
	Line int `json:"line"`
	Col  int `json:"col"`
}

// Problem is one thing wrong with a scenario file, located precisely.
type Problem struct {
	File string
	Pos  Pos
	Msg  string
	Hint string
}

// Error renders "file:line:col: message (hint)".
func (p Problem) Error() string {
	s := fmt.Sprintf("%s:%d:%d: %s", p.File, p.Pos.Line, p.Pos.Col, p.Msg)
	if p.Hint != "" {
		s += " (" + p.Hint + ")"
	}
	return s
}

// Problems is every problem found in one file, in file order.
type Problems []Problem

// Error renders one problem per line.
func (ps Problems) Error() string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += "\n"
		}
		s += p.Error()
	}
	return s
}
