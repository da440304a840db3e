package keyname

import (
	"slices"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/ledger"
)

func key(customer, event, typ, target string, rev int) string {
	return ledger.Key(customer, event, typ, target, rev)
}

func TestNames(t *testing.T) {
	retry := []string{key("cust-ada", "enquiry-3301", "reply_ack", "t-3301", 0), key("cust-ada", "enquiry-3301-retry", "reply_ack", "t-3301", 0)}
	tests := []struct {
		name        string
		keys, tasks []string
		width       int
		want        []string
	}{
		{"EventSuffixRoomy", retry, []string{"t-3301", "t-3301"}, 60,
			[]string{"cust-ada:enquiry-3301:reply_ack", "cust-ada:enquiry-3301-retry:reply_ack"}},
		{"EventSuffixNarrow", retry, []string{"t-3301", "t-3301"}, 20,
			[]string{"enquiry-3301", "enquiry-3301-retry"}},
		{"EventSuffixTooNarrow", retry, []string{"t-3301", "t-3301"}, 8,
			[]string{"…-3301", "…-retry"}},
		{"TargetShownWithoutTasks", retry, nil, 50,
			[]string{"cust-ada:enquiry-3301:reply_ack:t-3301", "cust-ada:enquiry-3301-retry:reply_ack:t-3301"}},
		{"SegmentsAddedToAllOrNone", retry, nil, 30,
			[]string{"cust-ada:enquiry-3301", "cust-ada:enquiry-3301-retry"}},
		{"TwoActionsOfOneCustomer", []string{key("cust-ada", "enquiry-1", "reply_ack", "t-1", 0), key("cust-ada", "refund-2", "refund", "t-1", 0)},
			[]string{"t-1", "t-1"}, 12, []string{"enquiry-1", "refund-2"}},
		{"TwoCustomersOneEvent", []string{key("cust-ada", "delay-14", "delivery_notice", "t-1", 0), key("cust-cy", "delay-14", "delivery_notice", "t-2", 0)},
			[]string{"t-1", "t-2"}, 20, []string{"cust-ada:delay-14", "cust-cy:delay-14"}},
		{"Revision", []string{key("cust-ada", "e-1", "notice", "t-1", 0), key("cust-ada", "e-1", "notice", "t-1", 1)},
			[]string{"t-1", "t-1"}, 10, []string{"r0", "r1"}},
		{"RevisionRoomy", []string{key("cust-ada", "e-1", "notice", "t-1", 0), key("cust-ada", "e-1", "notice", "t-1", 1)},
			[]string{"t-1", "t-1"}, 40, []string{"cust-ada:e-1:notice:r0", "cust-ada:e-1:notice:r1"}},
		{"OneKeyAlone", []string{key("cust-ada", "delay-14", "delivery_notice", "t-1", 0)}, []string{"t-1"}, 20,
			[]string{"cust-ada:delay-14"}},
		{"NotAGatehouseKey", []string{"order-42", "order-43"}, nil, 20, []string{"order-42", "order-43"}},
		{"NoLimit", retry, []string{"t-3301", "t-3301"}, 0,
			[]string{"cust-ada:enquiry-3301:reply_ack", "cust-ada:enquiry-3301-retry:reply_ack"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Names(tc.keys, tc.tasks, tc.width)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Names at %d = %q, want %q", tc.width, got, tc.want)
			}
		})
	}
}

// TestNamesTellKeysApart: whatever the width, no two different keys get
// one name, and a name is wider than asked only when the part that
// differs is.
func TestNamesTellKeysApart(t *testing.T) {
	var keys []string
	for _, c := range []string{"cust-ada", "cust-ben", "cust-ada-2"} {
		for _, e := range []string{"enquiry-3301", "enquiry-3301-retry", "refund-7"} {
			keys = append(keys, key(c, e, "reply_ack", "t-1", 0), key(c, e, "reply_ack", "t-1", 1))
		}
	}
	for w := 4; w <= 60; w++ {
		names := Names(keys, nil, w)
		seen := map[string]int{}
		for i, n := range names {
			if j, ok := seen[n]; ok {
				t.Fatalf("at %d columns %s and %s are both %q", w, keys[j], keys[i], n)
			}
			seen[n] = i
			if w >= 40 && ansi.StringWidth(n) > w {
				t.Errorf("at %d columns %q is wider", w, n)
			}
		}
	}
}

func TestTelling(t *testing.T) {
	keys := []string{key("cust-ada", "enquiry-3301", "reply_ack", "t-3301", 0), key("cust-ada", "enquiry-3301-retry", "reply_ack", "t-3301", 0),
		key("cust-ben", "enquiry-3301", "reply_ack", "t-3301", 0)}
	want := []string{"cust-ada:enquiry-3301", "enquiry-3301-retry", "cust-ben"}
	if got := Telling(keys, nil); !slices.Equal(got, want) {
		t.Fatalf("Telling = %q, want %q", got, want)
	}
}
