// The AI SDK useChat page: a chat whose ID is a turnstile session, streamed through the aisdk
// role's routes (POST /v1/chat, GET /v1/chat/{id}/stream) and resumed after a reload.
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App.jsx';
import './chat.css';

createRoot(document.getElementById('root')).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
