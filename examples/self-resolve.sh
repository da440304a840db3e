#!/bin/sh
# self-resolve.sh: how NOT to handle an unknown outcome, by a workflow
# that records the outcome itself.
#
#   usage: self-resolve.sh TASK CUSTOMER EVENT EMAIL
#
# Told 14 (the outcome of its earlier send is unknown), it does what a new
# user tries first: it says "not delivered" with gate resolve as itself
# (overriding the records, as the gate's refusal of a plain resolve
# suggests to someone who knows better), releases its own hold and sends
# again. Had the mailbox stored the first
# message, the customer would get two. On a registered ledger (every
# rehearsal's) resolving an outcome is a person's act: the gate refuses the
# workflow's resolve with exit 21 and records the refusal, and nothing is
# sent again. Rehearsing it (ack-resolves-itself.yaml) shows that; use
# ack.sh, which reconciles on 14, or hand the action to a person.
set -u

task=$1 customer=$2 event=$3 email=$4
actor=${GATEHOUSE_ACTOR:?set GATEHOUSE_ACTOR}
facts="--customer $customer --event $event --type reply_ack --target $task"

send() {
	gatehouse gate send --as "$actor" $facts --material crm.consent=yes >/dev/null 2>&1
}

gatehouse gate propose --as "$actor" --task "$task" $facts --to "$email" \
	--subject "We received your enquiry" \
	--body "Thank you for writing. We will answer within one working day." \
	--from support@shop.example --destination "$GATEHOUSE_DESTINATION" >/dev/null 2>&1
code=$?
if [ "$code" -eq 0 ]; then
	gatehouse gate approve --as policy $facts --material crm.consent=yes >/dev/null 2>&1
	send
	code=$?
fi
if [ "$code" -eq 14 ]; then
	# WRONG: nobody looked at the mailbox; the message may well be there.
	echo "outcome unknown (exit 14); saying it was not delivered and sending again"
	msg=$(gatehouse gate resolve --as "$actor" $facts --outcome not-delivered --override-records --reason "timed out" 2>&1 >/dev/null)
	code=$?
	if [ "$code" -ne 0 ]; then
		echo "resolve refused (exit $code): $msg"
		exit "$code"
	fi
	gatehouse gate release-hold --as "$actor" $facts --reason "resolved as not delivered" >/dev/null 2>&1
	send
	code=$?
fi
echo "done (exit $code)"
exit "$code"
