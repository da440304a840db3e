package testids

import "testing"

func TestMask(t *testing.T) {
	tests := []struct{ Name, In, Want string }{
		{"Whole", "id gh-qnijratvwdilhdai267a-a1@27d1fa41dbadf514.gatehouse.invalid ok",
			"id gh-####################-a1@################.gatehouse.invalid ok"},
		{"CutByAColumn", "│ gh-qnijratvw… │", "│ gh-#########… │"},
		{"CutInTheDomain", "gh-qnijratvwdilhdai267a-a12@27d1…", "gh-####################-a12@####…"},
		{"ActionKeysStay", "gh1:cust-ada:enquiry-4001:reply_ack:t-4001:r0", "gh1:cust-ada:enquiry-4001:reply_ack:t-4001:r0"},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			if got := Mask(tc.In); got != tc.Want {
				t.Errorf("Mask(%q)\n got %q\nwant %q", tc.In, got, tc.Want)
			}
		})
	}
}
