#!/bin/sh
# careless-ack.sh: how NOT to write the acknowledgement workflow.
#
#   usage: careless-ack.sh TASK CUSTOMER EVENT EMAIL
#
# It treats "outcome unknown" (exit 14) as "it failed, send it again". The
# gate refuses a second send of the same action (14 again), so this
# workflow does what careless code does next: it invents a new business
# event ("EVENT-retry"), which is a new action key, proposes, approves and
# sends that. The gate cannot know the two are the same acknowledgement; the
# customer gets two. Rehearsing it (careless-accept-then-drop.yaml) fails
# with arrivals 2, which is the point: the rehearsal catches the bug before
# the customer does. Use ack.sh instead, which reconciles on 14.
set -u

task=$1 customer=$2 event=$3 email=$4
actor=${GATEHOUSE_ACTOR:?set GATEHOUSE_ACTOR}

send_ack() {
	facts="--customer $customer --event $1 --type reply_ack --target $task"
	gatehouse gate propose --as "$actor" --task "$task" $facts --to "$email" \
		--subject "We received your enquiry" \
		--body "Thank you for writing. We will answer within one working day." \
		--from support@shop.example --destination "$GATEHOUSE_DESTINATION" >/dev/null 2>&1
	gatehouse gate approve --as policy $facts --material crm.consent=yes >/dev/null 2>&1
	gatehouse gate send --as "$actor" $facts --material crm.consent=yes >/dev/null 2>&1
}

send_ack "$event"
code=$?
if [ "$code" -eq 14 ]; then
	# WRONG: an unknown outcome may well have arrived. Reconcile instead.
	echo "send timed out (exit 14); sending again under $event-retry"
	send_ack "$event-retry"
	code=$?
fi
echo "done (exit $code)"
exit "$code"
