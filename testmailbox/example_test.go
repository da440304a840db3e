package testmailbox_test

import (
	"context"
	"fmt"
	"net/smtp"

	"gatehouse/testmailbox"
)

// Start a mailbox, send it one message with the standard library's client,
// and count what arrived for the action key.
func ExampleStart() {
	ctx := context.Background()
	m, err := testmailbox.Start(ctx, testmailbox.Config{})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	msg := "From: shop@example.com\r\nTo: ann@example.com\r\nSubject: Hello\r\n" +
		"X-Gatehouse-Action-Key: gh1:cust-42:enquiry-1:reply_ack:task-7:r0\r\n\r\nHi Ann.\r\n"
	if err := smtp.SendMail(m.SMTPAddr(), nil, "shop@example.com", []string{"ann@example.com"}, []byte(msg)); err != nil {
		panic(err)
	}
	n, err := m.WaitFor(ctx, testmailbox.Filter{ActionKey: "gh1:cust-42:enquiry-1:reply_ack:task-7:r0"}, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println("arrived:", n)
	// Output: arrived: 1
}

// Fault specs are what --fault flags and the HTTP API's "specs" accept.
func ExampleParseFault() {
	f, err := testmailbox.ParseFault("reject_temporary:p=0.3:seed=7")
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Kind, f.P, f.Seed)
	_, err = testmailbox.ParseFault("delay_reply=3s:count=zero")
	fmt.Println(err)
	// Output:
	// reject_temporary 0.3 7
	// fault spec "delay_reply=3s:count=zero": field "count": "zero" is not a positive integer
}
