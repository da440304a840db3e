#!/bin/sh
# ack.sh: acknowledge a customer's enquiry at most once, through the gate.
#
#   usage: ack.sh TASK CUSTOMER EVENT EMAIL
#
# A webhook handler calls it for every "new enquiry" event, duplicates
# included; the gate makes sure the customer gets one acknowledgement.
#
# Environment (a rehearsal sets the first five; production sets its own):
#   GATEHOUSE_LEDGER       the ledger file
#   GATEHOUSE_DESTINATION  where the message is handed over; approved with it
#   GATEHOUSE_ACTOR        who this workflow is: the task's owner
#   GATEHOUSE_CRM_URL      the CRM's API, re-read for consent before approving
#                          and again immediately before sending
#   ACK_APPROVER           a policy that approves at once when the customer has
#                          consented; without it the workflow sends only what a
#                          person approved
#
# It prints one line saying how it ended (two after an unknown outcome).
# Exit codes: the gate's (docs/cli.md), after doing what each one asks:
#   0   sent: by this run, or found at the destination by reconcile after the
#       outcome was unknown (a restarted run after a crash ends here)
#   10  already sent: a repeat delivery of the event; nothing was sent
#   12  denied: consent or the owner changed since approval, or nothing
#       approved is left to send (a colleague took the task over)
#   13  held for a person (reconcile could not prove delivery, a source down)
#   11  still in flight elsewhere after waiting 10 seconds
#   1, 2, 15, 16, 17  as the gate says; the gate's message is on the output
set -u

[ $# -eq 4 ] || { echo "usage: ack.sh TASK CUSTOMER EVENT EMAIL" >&2; exit 2; }
task=$1 customer=$2 event=$3 email=$4
actor=${GATEHOUSE_ACTOR:?set GATEHOUSE_ACTOR}

# The key facts are single words (the gate refuses white space in them), so
# the action can be named by them unquoted.
facts="--customer $customer --event $event --type reply_ack --target $task"

# consent re-reads the customer's consent from the CRM; a CRM that does not
# answer is said so, never guessed.
consent() {
	body=$(curl -fsS --max-time 5 "$GATEHOUSE_CRM_URL/customers/$customer" 2>/dev/null) || {
		echo '?unavailable'
		return
	}
	printf '%s\n' "$body" | sed -n 's/.*"consent":"\([^"]*\)".*/\1/p'
}

# reconcile asks the destination's own records; it never sends again.
reconcile() {
	echo "outcome unknown: reconciling, never sending again"
	msg=$(gatehouse gate reconcile --as "$actor" $facts 2>&1 >/dev/null)
	code=$?
	case $code in
	0) echo "reconciled: the destination has the message; nothing more to do"; exit 0 ;;
	19) echo "nothing to reconcile: its outcome was settled meanwhile; see gatehouse gate show ($msg)"; exit 19 ;;
	*) echo "not proven delivered: held for a person (exit $code) $msg"; exit "$code" ;;
	esac
}

msg=$(gatehouse gate propose --as "$actor" --task "$task" $facts --to "$email" \
	--subject "We received your enquiry" \
	--body "Thank you for writing. We will answer within one working day." \
	--from support@shop.example --destination "$GATEHOUSE_DESTINATION" 2>&1 >/dev/null)
code=$?
case $code in
0) ;;
10) echo "already sent: $event was acknowledged before; nothing sent"; exit 10 ;;
11) ;; # another delivery of the event is sending it right now: the send below waits for its answer
14) reconcile ;; # an earlier run's send has no known outcome
*) echo "propose refused (exit $code): $msg"; exit "$code" ;;
esac

if [ "$code" -eq 0 ] && [ -n "${ACK_APPROVER:-}" ]; then
	c=$(consent)
	if [ "$c" = yes ]; then
		# A concurrent delivery may have approved or sent it already: the
		# send below decides, so a refused approval is not an error here.
		gatehouse gate approve --as "$ACK_APPROVER" $facts --material "crm.consent=$c" >/dev/null 2>&1
	else
		echo "no consent ($c): the policy does not approve"
	fi
fi

waited=0
while :; do
	msg=$(gatehouse gate send --as "$actor" $facts --material "crm.consent=$(consent)" 2>&1 >/dev/null)
	code=$?
	case $code in
	0) echo "sent the acknowledgement of $event"; exit 0 ;;
	10) echo "already sent: $event was acknowledged before; nothing sent"; exit 10 ;;
	11)
		# Another executor is sending it right now. Sending is safe to ask
		# again: the gate answers 10 once that send is recorded.
		waited=$((waited + 1))
		[ "$waited" -lt 100 ] || { echo "still in flight elsewhere: $msg"; exit 11; }
		sleep 0.1
		;;
	14) reconcile ;;
	*) echo "not sent (exit $code): $msg"; exit "$code" ;;
	esac
done
