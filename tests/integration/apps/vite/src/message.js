export const message = 'hello from vite';
