// Follows new arrivals on the list page through the mailbox's event
// stream. Rows are built with createElement and textContent only: a
// subject or an action key is text, never markup (the page's
// Content-Security-Policy also refuses HTML sinks: require-trusted-types-for).
"use strict";
(function () {
  var table = document.getElementById("messages");
  if (!table || !window.EventSource) {
    return;
  }
  var body = table.tBodies[0];
  var shown = document.getElementById("shown");
  var total = document.getElementById("total");
  var live = document.getElementById("live");
  var empty = document.getElementById("empty");

  function two(n) { return (n < 10 ? "0" : "") + n; }
  function clock(d) {
    var ms = String(d.getMilliseconds());
    while (ms.length < 3) { ms = "0" + ms; }
    return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds()) + "." + ms;
  }
  function cell(cls) {
    var td = document.createElement("td");
    td.className = cls;
    return td;
  }
  function link(href, text) {
    var a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }
  function badge(cls, text) {
    var s = document.createElement("span");
    s.className = cls;
    s.textContent = text;
    return s;
  }
  // count sets the "×N" beside every row of key already shown.
  function count(key, n) {
    var rows = body.rows;
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].dataset.key !== key) { continue; }
      var td = rows[i].cells[2];
      var old = td.querySelector(".count");
      if (old) { old.remove(); }
      if (n > 1) {
        td.appendChild(document.createTextNode(" "));
        var c = badge("count", "×" + n);
        c.title = "arrivals of this action key";
        td.appendChild(c);
      }
    }
  }
  function row(m) {
    var tr = document.createElement("tr");
    tr.id = "m" + m.id;
    tr.dataset.key = m.action_key;
    if (m.duplicate) { tr.className = "dup"; }
    var href = "/messages/" + m.id;
    var id = cell("id");
    id.appendChild(link(href, String(m.id)));
    var at = new Date(m.received_at);
    var time = cell("time");
    var t = document.createElement("time");
    t.dateTime = m.received_at;
    t.title = at.toString();
    t.textContent = clock(at);
    time.appendChild(t);
    var key = cell("key");
    if (m.action_key) {
      key.appendChild(link("/?action_key=" + encodeURIComponent(m.action_key), m.action_key));
    } else {
      key.appendChild(badge("none", "no action key"));
    }
    var to = cell("to");
    to.textContent = (m.to || []).join(", ");
    var subject = cell("subject");
    subject.appendChild(link(href, m.subject || "(no subject)"));
    var mark = cell("mark");
    if (m.duplicate) { mark.appendChild(badge("duplicate", "duplicate")); }
    [id, time, key, to, subject, mark].forEach(function (td) { tr.appendChild(td); });
    return tr;
  }
  // An event's id is EPOCH/OFFSET: OFFSET counts the matches so far.
  function offset(id) {
    var i = id.lastIndexOf("/");
    return i < 0 ? "" : id.slice(i + 1);
  }

  var es = new EventSource(table.dataset.events);
  es.addEventListener("open", function () { live.textContent = "Following new arrivals."; });
  es.addEventListener("error", function () { live.textContent = "Not connected to the mailbox; retrying."; });
  es.addEventListener("arrival", function (ev) {
    var m = JSON.parse(ev.data);
    if (document.getElementById("m" + m.id)) { return; }
    if (empty) { empty.remove(); empty = null; }
    body.insertBefore(row(m), body.firstChild);
    if (m.action_key) { count(m.action_key, m.key_arrivals); }
    shown.textContent = String(body.rows.length);
    total.textContent = offset(ev.lastEventId) || total.textContent;
  });
  es.addEventListener("cleared", function () {
    while (body.firstChild) { body.removeChild(body.firstChild); }
    shown.textContent = "0";
    total.textContent = "0";
    live.textContent = "The mailbox was cleared (a new epoch); following new arrivals.";
  });
})();
