// The page's text comes from message.js; an edit of message.js is applied by
// Vite's HMR without a reload (test_real_apps.py edits a copy of it).
import { message } from './message.js';

const el = document.getElementById('msg');
el.textContent = message;

if (import.meta.hot) {
    import.meta.hot.accept('./message.js', (mod) => {
        if (mod) el.textContent = mod.message;
    });
}
