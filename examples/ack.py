#!/usr/bin/env python3
"""ack.py: acknowledge a customer's enquiry at most once, through the gate.

    usage: ack.py < event.json

The event is one JSON object on standard input, as a webhook delivers it:
{"task": "t-1", "customer": "cust-ada", "event": "enquiry-1", "to":
"ada@example.com", ...} (a rehearsal's run_workflow step with `action:`
writes exactly that). Only the standard library is used.

Environment (a rehearsal sets the first four; production sets its own):
  GATEHOUSE_LEDGER       the ledger file
  GATEHOUSE_DESTINATION  where the message is handed over; approved with it
  GATEHOUSE_ACTOR        who this workflow is: the task's owner
  GATEHOUSE_CRM_URL      the CRM's API, re-read for consent before approving
                         and again immediately before sending
  ACK_APPROVER           a policy that approves at once when the customer has
                         consented; without it the workflow sends only what a
                         person approved
  ACK_AWAIT_APPROVAL     without ACK_APPROVER: wait up to this many seconds for a
                         person to approve the draft before sending

It prints one line saying how it ended (two after an unknown outcome).
Exit codes: the gate's (docs/cli.md), after doing what each one asks:
  0   sent: by this run, or found at the destination by reconcile after the
      outcome was unknown (a restarted run after a crash ends here)
  10  already sent: a repeat delivery of the event; nothing was sent
  12  denied: consent or the owner changed since approval, or nothing
      approved is left to send (a colleague took the task over)
  13  held for a person (reconcile could not prove delivery, a source down)
  11  still in flight elsewhere after waiting 10 seconds
  1, 2, 15, 16, 17  as the gate says; the gate's message is printed
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

# The gate's exit codes this workflow acts on (docs/cli.md, "Exit codes").
SENT, DUPLICATE, IN_FLIGHT, UNKNOWN = 0, 10, 11, 14


def gate(*args):
    """Runs one gate verb; returns its exit code and its one-line message."""
    p = subprocess.run(["gatehouse", "gate", *args], capture_output=True, text=True)
    return p.returncode, p.stderr.strip()


def consent(customer):
    """Re-reads consent from the CRM; a CRM that does not answer is said so."""
    url = os.environ["GATEHOUSE_CRM_URL"] + "/customers/" + customer
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.load(resp)["fields"].get("consent", "")
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return "?unavailable"


def reconcile(actor, facts):
    """Asks the destination's own records; never sends again."""
    print("outcome unknown: reconciling, never sending again")
    code, msg = gate("reconcile", "--as", actor, *facts)
    if code == SENT:
        print("reconciled: the destination has the message; nothing more to do")
    elif code == 19:
        print(f"nothing to reconcile: its outcome was settled meanwhile; see gatehouse gate show ({msg})")
    else:
        print(f"not proven delivered: held for a person (exit {code}) {msg}")
    return code


def await_approval(facts, seconds):
    """Waits until the action is approved (or leaves the draft states).

    Whatever happens meanwhile (a takeover, a changed field), the send after
    it is where the gate decides; this only waits for a person.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        p = subprocess.run(["gatehouse", "gate", "show", *facts, "--json"], capture_output=True, text=True)
        try:
            state = json.loads(p.stdout)["action"]["state"]
        except (ValueError, KeyError, TypeError):
            state = ""
        if state not in ("drafting", "awaiting_approval"):
            return
        time.sleep(0.1)


def main():
    ev = json.load(sys.stdin)
    actor = os.environ["GATEHOUSE_ACTOR"]
    facts = ["--customer", ev["customer"], "--event", ev["event"],
             "--type", ev.get("type", "reply_ack"), "--target", ev.get("target", ev["task"])]

    code, msg = gate("propose", "--as", actor, "--task", ev["task"], *facts, "--to", ev["to"],
                     "--subject", "We received your enquiry",
                     "--body", "Thank you for writing. We will answer within one working day.",
                     "--from", "support@shop.example", "--destination", os.environ["GATEHOUSE_DESTINATION"])
    if code == DUPLICATE:
        print(f"already sent: {ev['event']} was acknowledged before; nothing sent")
        return code
    if code == UNKNOWN:  # an earlier run's send has no known outcome
        return reconcile(actor, facts)
    if code not in (0, IN_FLIGHT):  # in flight: the send below waits for the other delivery's answer
        print(f"propose refused (exit {code}): {msg}")
        return code

    approver = os.environ.get("ACK_APPROVER", "")
    if code == IN_FLIGHT:
        pass
    elif approver:
        c = consent(ev["customer"])
        if c == "yes":
            # A concurrent delivery may have approved or sent it already: the
            # send below decides, so a refused approval is not an error here.
            gate("approve", "--as", approver, *facts, "--material", "crm.consent=" + c)
        else:
            print(f"no consent ({c}): the policy does not approve")

    elif os.environ.get("ACK_AWAIT_APPROVAL"):
        await_approval(facts, float(os.environ["ACK_AWAIT_APPROVAL"]))

    for _ in range(100):
        code, msg = gate("send", "--as", actor, *facts, "--material", "crm.consent=" + consent(ev["customer"]))
        if code == SENT:
            print(f"sent the acknowledgement of {ev['event']}")
            return code
        if code == DUPLICATE:
            print(f"already sent: {ev['event']} was acknowledged before; nothing sent")
            return code
        if code == IN_FLIGHT:
            # Another executor is sending it right now. Asking again is safe:
            # the gate answers 10 once that send is recorded.
            time.sleep(0.1)
            continue
        if code == UNKNOWN:
            return reconcile(actor, facts)
        print(f"not sent (exit {code}): {msg}")
        return code
    print(f"still in flight elsewhere: {msg}")
    return IN_FLIGHT


if __name__ == "__main__":
    sys.exit(main())
