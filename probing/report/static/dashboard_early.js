// Runs before any figure script: collect script errors so #status (and a headless browser) can report them.
window.__probingErrors = [];
window.addEventListener('error', function (e) { window.__probingErrors.push(String(e.message || e)); });
