// The new-run form recomputes its trace count and judge cost estimate as boxes and filters
// change: it asks the same page with the form as a query string (GET never starts a run)
// and swaps in the parts that depend on the selection. A form that posts (the preview form,
// whose draft is too long for a URL) is posted without its submit button, which shows it
// again filled in and starts nothing (data-live-estimate-method="post").
const PARTS = ["[data-judge-estimate]", "[data-selected-traces]"];

function query(form) {
  const params = new URLSearchParams();
  for (const [name, value] of new FormData(form)) {
    if (name !== "csrfmiddlewaretoken" && typeof value === "string") params.append(name, value);
  }
  return params;
}

function ask(form) {
  const headers = { Accept: "text/html" };
  if (form.dataset.liveEstimateMethod === "post") {
    return fetch(form.dataset.liveEstimate, { method: "POST", body: new FormData(form), credentials: "same-origin", headers });
  }
  return fetch(`${form.dataset.liveEstimate}?${query(form)}`, { credentials: "same-origin", headers });
}

async function refresh(form) {
  const answer = await ask(form);
  if (!answer.ok) return;
  const page = new DOMParser().parseFromString(await answer.text(), "text/html");
  for (const selector of PARTS) {
    const fresh = page.querySelector(selector);
    const here = form.querySelector(selector);
    if (fresh && here) here.replaceWith(document.importNode(fresh, true));
  }
  form.dataset.estimateFor = String(query(form));
}

function watch(form) {
  let timer = 0;
  const later = () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(() => refresh(form).catch(() => {}), 300);
  };
  form.addEventListener("change", later);
  form.addEventListener("input", later);
}

function start() {
  document.querySelectorAll("form[data-live-estimate]").forEach(watch);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
