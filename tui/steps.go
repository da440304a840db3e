package tui

import (
	"fmt"
	"strings"

	"gatehouse/scenarios"
)

// describeStep says what a scenario step does, in plain words, before it
// runs. A step's own note, when the author wrote one, says it best.
func describeStep(sc *scenarios.Scenario, s scenarios.Step) string {
	if len(s.Parallel) > 0 {
		parts := make([]string, len(s.Parallel))
		for i, sub := range s.Parallel {
			parts[i] = describeStep(sc, sub)
		}
		return "At the same moment: " + strings.Join(parts, "; ")
	}
	text := stepSentence(s)
	if v := scenarios.ConsentReading(sc, &s); v != "" {
		text += ", which the gate reads as " + v // the word its denial will use
	}
	if s.Expect != "" {
		text += " (expected: " + s.Expect + ")"
	}
	if s.Note != "" {
		text += " — " + s.Note // the author's remark adds to the step, it does not replace it
	}
	return text
}

// stepSentence words one verb of the scenario format (docs/scenarios.md).
func stepSentence(s scenarios.Step) string {
	a, act, task := s.Actor, s.Action, s.Task
	switch s.Do {
	case "propose":
		return a + " drafts " + act
	case "revise":
		return a + " edits the draft of " + act
	case "approve":
		return a + " approves " + act
	case "send":
		return a + " asks the gate to send " + act
	case "deliver_event":
		return "the business event behind " + act + " arrives and " + a + " handles it"
	case "cancel":
		return a + " withdraws " + act + ": " + s.Reason
	case "view":
		return a + " opens task " + task + " (advisory: the owner does not change)"
	case "leave":
		return a + " closes task " + task
	case "claim":
		return a + " claims task " + task
	case "take_over":
		return a + " takes over task " + task + ": " + s.Reason
	case "release":
		return a + " gives up task " + task
	case "complete_task":
		return a + " completes task " + task
	case "set":
		return fmt.Sprintf("%s%s: %s becomes %q", s.Customer, task, s.Field, s.Value)
	case "source_down":
		return s.Source + " becomes unavailable"
	case "source_up":
		return s.Source + " is back"
	case "mailbox_fault":
		return "the mail server misbehaves: " + s.Fault
	case "crash":
		return a + "'s process dies while sending " + act + " (" + s.Point + ")"
	case "restart":
		return "the gate restarts and reads its ledger; nothing is re-sent"
	case "reconcile":
		return a + " reconciles " + act + " from the mail server's own records"
	case "import_audience":
		return a + " uploads an audience file as release " + s.Release + "; each row is checked against the CRM"
	case "remove_recipient":
		return a + " removes " + s.Customer + " from release " + s.Release + ": " + s.Reason
	case "approve_audience":
		return a + " approves sending release " + s.Release
	case "send_audience":
		return a + " sends release " + s.Release + " once to every eligible customer"
	case "run_workflow", "start_workflow":
		return runSentence(s)
	case "await_workflow":
		return "wait for run " + s.Run + " to end"
	case "await_state":
		return "wait until " + act + " is " + s.State + " (a running workflow gets it there)"
	case "pause_executor":
		return a + "'s executor starts sending " + act + " and stands still (" + s.Point + "), as a stopped or stalled process would"
	case "resume_executor":
		return "the paused executor of " + act + " wakes and goes on with its send"
	}
	return strings.TrimSpace(s.Do + " " + act + " " + task + " " + a)
}

// runSentence words a step that runs a team's own command: the command is
// a real program, so the sentence names it.
func runSentence(s scenarios.Step) string {
	cmd := strings.Join(s.Command, " ")
	if s.Shell != "" {
		cmd = "sh -c " + s.Shell
	}
	text := "run " + s.Actor + "'s command: " + cmd
	if s.Copies > 1 {
		text = fmt.Sprintf("run %d copies of %s's command at once: %s", s.Copies, s.Actor, cmd)
	}
	if s.Do == "start_workflow" {
		text += " (in the background, as run " + s.Run + ")"
	}
	switch {
	case s.KillAt != "":
		text += "; kill it at " + s.KillAt
	case s.KillAfter != "":
		text += "; kill it after " + s.KillAfter
	}
	return text
}
